/* ms_chat.c — the chat templates of the supported models, rendered in C.
 *
 * Each function reproduces, for plain system/user/assistant turns (no tools),
 * the Jinja template shipped in the model's tokenizer_config.json:
 *  - Llama-3 (tokenizers/llama3): per message
 *      [bos_token if first] "<|start_header_id|>" role "<|end_header_id|>\n\n"
 *      content|trim "<|eot_id|>"
 *    then "<|start_header_id|>assistant<|end_header_id|>\n\n". That template
 *    appends the assistant header unconditionally; here it follows
 *    add_generation_prompt, which callers set for generation.
 *  - ChatML / Qwen3 (tokenizers/qwen3): "<|im_start|>" role "\n" content
 *    "<|im_end|>\n", with Qwen3's reasoning rules for assistant turns (below),
 *    then "<|im_start|>assistant\n".
 */
#include <stdlib.h>
#include <string.h>

#include "ms_tokenizer.h"

typedef struct {
    char *s;
    size_t n, cap;
    ms_status st;
} sbuf;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->st < 0) return;
    if (b->n + n + 1 > b->cap) {
        size_t c = b->cap ? b->cap : 256;
        while (c < b->n + n + 1) c *= 2;
        char *p = ms_realloc(b->s, c);
        if (!p) {
            b->st = MS_ERR_NOMEM;
            return;
        }
        b->s = p;
        b->cap = c;
    }
    memcpy(b->s + b->n, s, n);
    b->n += n;
    b->s[b->n] = '\0';
}

static void sb_str(sbuf *b, const char *s) { sb_put(b, s, strlen(s)); }

static const char *role_name(ms_chat_role r) {
    switch (r) {
    case MS_ROLE_SYSTEM: return "system";
    case MS_ROLE_USER: return "user";
    case MS_ROLE_ASSISTANT: return "assistant";
    }
    return NULL;
}

/* Python str.isspace() for the character at s (Jinja's trim is str.strip()):
 * its length in bytes, 0 if not whitespace. */
static int py_space_len(const unsigned char *s, size_t n) {
    if (n == 0) return 0;
    unsigned c = s[0];
    if ((c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20)) return 1;
    if (n >= 2 && c == 0xC2 && (s[1] == 0x85 || s[1] == 0xA0)) return 2;
    if (n >= 3 && c == 0xE1 && s[1] == 0x9A && s[2] == 0x80) return 3; /* U+1680 */
    if (n >= 3 && c == 0xE2 && s[1] == 0x80 && (s[2] <= 0x8A || s[2] == 0xA8 || s[2] == 0xA9 || s[2] == 0xAF))
        return s[2] >= 0x80 ? 3 : 0;                                   /* U+2000..200A, 2028, 2029, 202F */
    if (n >= 3 && c == 0xE2 && s[1] == 0x81 && s[2] == 0x9F) return 3; /* U+205F */
    if (n >= 3 && c == 0xE3 && s[1] == 0x80 && s[2] == 0x80) return 3; /* U+3000 */
    return 0;
}

/* [*a, *e) ← str.strip() of [a, e) */
static void py_strip(const char **a, const char **e) {
    const unsigned char *p = (const unsigned char *)*a, *q = (const unsigned char *)*e;
    int l;
    while (p < q && (l = py_space_len(p, (size_t)(q - p))) > 0) p += l;
    for (;;) {
        /* the last character starts at most 3 bytes before q */
        const unsigned char *c = q;
        int back = 0;
        while (c > p && back < 4) {
            c--;
            back++;
            if ((*c & 0xC0) != 0x80) break;
        }
        if (c >= q || py_space_len(c, (size_t)(q - c)) != (int)(q - c)) break;
        q = c;
    }
    *a = (const char *)p;
    *e = (const char *)q;
}

static void strip_nl(const char **a, const char **e, bool left, bool right) {
    while (left && *a < *e && **a == '\n') (*a)++;
    while (right && *e > *a && (*e)[-1] == '\n') (*e)--;
}

/* Last occurrence of needle in [a, e), NULL if none. */
static const char *find_last(const char *a, const char *e, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = e - n; e - a >= (ptrdiff_t)n && p >= a; p--)
        if (memcmp(p, needle, n) == 0) return p;
    return NULL;
}

static const char *find_first(const char *a, const char *e, const char *needle) {
    size_t n = strlen(needle);
    for (const char *p = a; e - p >= (ptrdiff_t)n; p++)
        if (memcmp(p, needle, n) == 0) return p;
    return NULL;
}

static void render_llama3(sbuf *b, const ms_chat_msg *msgs, int64_t n, bool gen) {
    for (int64_t i = 0; i < n; i++) {
        if (i == 0) sb_str(b, "<|begin_of_text|>");
        sb_str(b, "<|start_header_id|>");
        sb_str(b, role_name(msgs[i].role));
        sb_str(b, "<|end_header_id|>\n\n");
        const char *a = msgs[i].content, *e = a + strlen(a);
        py_strip(&a, &e);
        sb_put(b, a, (size_t)(e - a));
        sb_str(b, "<|eot_id|>");
    }
    if (gen) sb_str(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

static bool is_tool_response(const char *s) {
    size_t n = strlen(s), a = strlen("<tool_response>"), z = strlen("</tool_response>");
    return n >= a && n >= z && memcmp(s, "<tool_response>", a) == 0 && memcmp(s + n - z, "</tool_response>", z) == 0;
}

/* Qwen3's template, without tools:
 *  - ns.last_query_index = the last user message that is not a wrapped
 *    <tool_response> (len-1 when there is none);
 *  - an assistant message carrying "</think>" is split: content = after the
 *    last "</think>" (leading '\n' removed), reasoning = before the first
 *    "</think>", after the last "<think>", '\n'-trimmed;
 *  - an assistant message after last_query_index that is the last message,
 *    or has reasoning, is rendered "<think>\n" reasoning "\n</think>\n\n"
 *    content; earlier ones lose their reasoning.
 * The generation prompt is "<|im_start|>assistant\n" — enable_thinking unset,
 * as when the template is applied without it: the model then opens its own
 * <think> block. (enable_thinking=false would add "<think>\n\n</think>\n\n".) */
static void render_chatml(sbuf *b, const ms_chat_msg *msgs, int64_t n, bool gen) {
    int64_t last_query = n - 1;
    for (int64_t i = n - 1; i >= 0; i--)
        if (msgs[i].role == MS_ROLE_USER && !is_tool_response(msgs[i].content)) {
            last_query = i;
            break;
        }
    for (int64_t i = 0; i < n; i++) {
        const ms_chat_msg *m = &msgs[i];
        if (m->role != MS_ROLE_ASSISTANT) {
            sb_str(b, "<|im_start|>");
            sb_str(b, role_name(m->role));
            sb_str(b, "\n");
            sb_str(b, m->content);
            sb_str(b, "<|im_end|>\n");
            continue;
        }
        const char *c = m->content, *ce = c + strlen(c);
        const char *r = "", *re = r;
        const char *end_think = find_first(c, ce, "</think>");
        if (end_think) {
            r = c;
            re = end_think;
            strip_nl(&r, &re, false, true);
            const char *open = find_last(r, re, "<think>");
            if (open) r = open + strlen("<think>");
            strip_nl(&r, &re, true, false);
            c = find_last(c, ce, "</think>") + strlen("</think>");
            strip_nl(&c, &ce, true, false);
        }
        sb_str(b, "<|im_start|>assistant\n");
        if (i > last_query && (i == n - 1 || re > r)) {
            strip_nl(&r, &re, true, true);
            strip_nl(&c, &ce, true, false);
            sb_str(b, "<think>\n");
            sb_put(b, r, (size_t)(re - r));
            sb_str(b, "\n</think>\n\n");
        }
        sb_put(b, c, (size_t)(ce - c));
        sb_str(b, "<|im_end|>\n");
    }
    if (gen) sb_str(b, "<|im_start|>assistant\n");
}

ms_status ms_chat_render(ms_chat_kind kind, const ms_chat_msg *msgs, int64_t n, bool add_generation_prompt,
                         char **text) {
    MS_ASSERT(text && (msgs || n == 0) && n >= 0);
    *text = NULL;
    for (int64_t i = 0; i < n; i++) {
        if (!role_name(msgs[i].role))
            MS_FAIL(MS_ERR_INVALID, "chat: message %lld has an unknown role %d", (long long)i, (int)msgs[i].role);
        if (!msgs[i].content) MS_FAIL(MS_ERR_INVALID, "chat: message %lld has no content", (long long)i);
    }
    if (kind != MS_CHAT_LLAMA3 && kind != MS_CHAT_CHATML)
        MS_FAIL(MS_ERR_UNSUPPORTED, "chat: the model has no chat template (kind %d)", (int)kind);
    sbuf b = {0};
    sb_put(&b, "", 0);
    if (kind == MS_CHAT_LLAMA3)
        render_llama3(&b, msgs, n, add_generation_prompt);
    else
        render_chatml(&b, msgs, n, add_generation_prompt);
    if (b.st < 0) {
        free(b.s);
        return b.st;
    }
    *text = b.s;
    return MS_OK;
}
