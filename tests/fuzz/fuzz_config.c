/* fuzz_config — ms_cfg_parse on arbitrary bytes. An accepted config must pass
 * ms_cfg_check, and dump → parse must give back the same struct. */
#include "ms_config.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* libconfig 1.5 leaks the string token it holds as lookahead when it stops at
 * a syntax error (its grammar has no %destructor): a few bytes per refused
 * file, once per process in the nodes. Only the lexer's token allocations
 * are ignored; a missing config_destroy would still leak settings (allocated
 * by the parser) and be reported. */
const char *__lsan_default_suppressions(void);
const char *__lsan_default_suppressions(void) { return "leak:strbuf_append\nleak:libconfig_yylex\n"; }

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    ms_log_set_level(MS_LOG_OFF);
    if (size > (1 << 16)) return 0;
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    static ms_cfg c, back; /* ~30 KB each: off the stack */
    char err[512];
    ms_status st = ms_cfg_parse_ex(text, "fuzz.cfg", &c, err, sizeof err);
    free(text);
    if (st != MS_OK) {
        MS_ASSERT(st < 0 && err[0] != '\0');
        return 0;
    }
    MS_ASSERT(ms_cfg_check(&c, err, sizeof err) == MS_OK);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    MS_ASSERT(m);
    ms_cfg_dump(&c, m, true);
    fclose(m);
    MS_ASSERT(ms_cfg_parse_ex(buf, "fuzz.cfg", &back, err, sizeof err) == MS_OK);
    MS_ASSERT(memcmp(&c, &back, sizeof c) == 0);
    free(buf);
    return 0;
}
