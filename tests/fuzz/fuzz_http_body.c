/* fuzz_http_body — ms_http_parse_request on arbitrary bytes, as a completions
 * body and as a chat body. An accepted request must satisfy every bound the
 * server relies on; a refused one must name an error. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ms_http.h"

static void check(const uint8_t *data, size_t size, bool chat) {
    ms_http_request r;
    char err[256];
    ms_status s = ms_http_parse_request((const char *)data, size, chat, &r, err, sizeof err);
    if (s != MS_OK) {
        if (err[0] == 0 || r.prompt || r.messages) abort();
        return;
    }
    if (r.max_tokens < 0 || r.max_tokens > MS_HTTP_MAX_TOKENS_CAP) abort();
    if (!(r.temperature >= 0 && r.temperature <= 2) || !(r.top_p > 0 && r.top_p <= 1)) abort();
    if (r.n_stop < 0 || r.n_stop > MS_HTTP_MAX_STOP) abort();
    for (int k = 0; k < r.n_stop; k++)
        if (r.stop_len[k] == 0 || r.stop_len[k] > MS_HTTP_MAX_STOP_LEN || strlen(r.stop[k]) != r.stop_len[k]) abort();
    if (strlen(r.model) >= MS_HTTP_MODEL_MAX) abort();
    if (chat) {
        if (r.n_messages < 1 || r.n_messages > MS_HTTP_MAX_MESSAGES || !r.messages || r.prompt) abort();
        for (int64_t i = 0; i < r.n_messages; i++)
            if (!r.messages[i].content || (int)r.messages[i].role < 0 || r.messages[i].role > MS_ROLE_ASSISTANT) abort();
    } else if (!r.prompt || strlen(r.prompt) != r.prompt_len || r.messages) {
        abort();
    }
    ms_http_request_free(&r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    check(data, size, false);
    check(data, size, true);
    return 0;
}
