/* microspec-config — check a cluster configuration file and read keys from it
 * (for cluster/launch.sh and people). Loads with ms_cfg_load, so the checks
 * and the "FILE:LINE: PATH: problem" messages are the nodes' own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ms_config.h"

#define TOOL "microspec-config"

static void usage(FILE *f) {
    fprintf(f,
            "usage: " TOOL " CONFIG [--check] [--get PATH]... [--dump [--secrets]]\n"
            "\n"
            "Validates a MicroSpec cluster configuration (libconfig text, docs/architecture.md §7) the way the\n"
            "nodes do at start. Model files are not opened: the nodes check them.\n"
            "\n"
            "  --check          validate only (the default when nothing else is asked); prints \"ok\";\n"
            "                   a bad file prints FILE:LINE: PATH: problem on stderr and exits 1\n"
            "  --get PATH       print the value of a key (dotted path, e.g. http.port), one line per\n"
            "                   --get, in order; booleans as true/false; secrets as they are\n"
            "  --dump           print the effective configuration as libconfig text (secrets hidden)\n"
            "  --secrets        with --dump: include the CURVE keys and the bearer token\n"
            "  -h, --help       this text\n"
            "\n"
            "Exit status: 0 ok, 1 invalid config or unknown key, 2 usage.\n"
            "\n"
            "Keys:\n");
    ms_cfg_help(f);
}

int main(int argc, char **argv) {
    const char *path = NULL;
    bool check = false, dump = false, secrets = false;
    const char **gets = calloc((size_t)argc, sizeof *gets);
    int n_get = 0;
    if (!gets) return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            free(gets);
            return 0;
        } else if (!strcmp(a, "--check")) {
            check = true;
        } else if (!strcmp(a, "--dump")) {
            dump = true;
        } else if (!strcmp(a, "--secrets")) {
            secrets = true;
        } else if (!strcmp(a, "--get")) {
            if (i + 1 >= argc) {
                fprintf(stderr, TOOL ": --get needs a PATH\n");
                free(gets);
                return 2;
            }
            gets[n_get++] = argv[++i];
        } else if (a[0] == '-' && a[1]) {
            fprintf(stderr, TOOL ": unknown option %s (see --help)\n", a);
            free(gets);
            return 2;
        } else if (!path) {
            path = a;
        } else {
            fprintf(stderr, TOOL ": one CONFIG only (got %s and %s)\n", path, a);
            free(gets);
            return 2;
        }
    }
    if (!path) {
        usage(stderr);
        free(gets);
        return 2;
    }
    if (secrets && !dump) {
        fprintf(stderr, TOOL ": --secrets goes with --dump\n");
        free(gets);
        return 2;
    }
    if (!dump && !n_get) check = true;

    /* The loader logs its error; this tool prints the bare message instead,
     * unless MS_LOG asks for logs. */
    if (!getenv("MS_LOG")) ms_log_set_level(MS_LOG_OFF);
    ms_cfg *c = malloc(sizeof *c);
    char err[2048];
    int rc = 0;
    if (!c) {
        fprintf(stderr, TOOL ": out of memory\n");
        free(gets);
        return 1;
    }
    if (ms_cfg_load_ex(path, c, err, sizeof err) != MS_OK) {
        fprintf(stderr, "%s\n", err);
        rc = 1;
        goto out;
    }
    for (int i = 0; i < n_get; i++) {
        char v[PATH_MAX];
        if (ms_cfg_get_string(c, gets[i], v, sizeof v) != MS_OK) {
            fprintf(stderr, TOOL ": %s: not a key of the configuration (see --help)\n", gets[i]);
            rc = 1;
            goto out;
        }
        printf("%s\n", v);
    }
    if (dump) ms_cfg_dump(c, stdout, secrets);
    if (check) printf("ok\n");
out:
    free(c);
    free(gets);
    return rc;
}
