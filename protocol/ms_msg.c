/* ms_msg.c — checks and helpers on messages. */
#include "ms_msg.h"

#include <string.h>

int64_t ms_tree_distinct_ids(const ms_tree *t, int32_t *out) {
    int64_t m = 0;
    for (int64_t i = 1; i < t->n; i++) {
        int64_t j = 0;
        while (j < m && out[j] != t->token[i]) j++;
        if (j == m) out[m++] = t->token[i];
    }
    return m;
}

ms_status ms_tree_validate(const ms_tree *t) {
    if (!t) MS_FAIL(MS_ERR_INVALID, "draft tree: no tree");
    if (t->n < 1 || t->n > MS_TREE_MAX)
        MS_FAIL(MS_ERR_FORMAT, "draft tree: %lld nodes, expected 1..%d", (long long)t->n, MS_TREE_MAX);
    if (t->parent[0] != -1 || t->depth[0] != 0 || t->mask[0] != 1)
        MS_FAIL(MS_ERR_FORMAT, "draft tree: node 0 is not a root (parent %d, depth %d, mask %#llx)",
                (int)t->parent[0], (int)t->depth[0], (unsigned long long)t->mask[0]);
    for (int64_t i = 0; i < t->n; i++) {
        if (t->token[i] < 0)
            MS_FAIL(MS_ERR_FORMAT, "draft tree: node %lld: token %d < 0", (long long)i, (int)t->token[i]);
        if (i == 0) continue;
        int32_t p = t->parent[i];
        if (p < 0 || p >= i)
            MS_FAIL(MS_ERR_FORMAT, "draft tree: node %lld: parent %d, expected 0..%lld", (long long)i, (int)p,
                    (long long)i - 1);
        if (t->depth[i] != t->depth[p] + 1)
            MS_FAIL(MS_ERR_FORMAT, "draft tree: node %lld: depth %d, parent depth %d", (long long)i, (int)t->depth[i],
                    (int)t->depth[p]);
        uint64_t want = t->mask[p] | (UINT64_C(1) << i);
        if (t->mask[i] != want)
            MS_FAIL(MS_ERR_FORMAT, "draft tree: node %lld: mask %#llx, expected %#llx", (long long)i,
                    (unsigned long long)t->mask[i], (unsigned long long)want);
    }
    if (!ms_tree_ngram_valid(t))
        MS_FAIL(MS_ERR_FORMAT, "draft tree: n-gram bits %#llx name the root or nodes past %lld",
                (unsigned long long)t->ngram, (long long)t->n - 1);
    return MS_OK;
}

bool ms_tree_ngram_valid(const ms_tree *t) {
    const uint64_t nodes = t->n >= MS_TREE_MAX ? ~UINT64_C(0) : (UINT64_C(1) << t->n) - 1;
    return !(t->ngram & ~(nodes & ~UINT64_C(1)));
}

void ms_tree_root(ms_tree *t, int32_t root) {
    memset(t, 0, sizeof *t);
    t->n = 1;
    t->token[0] = root;
    t->parent[0] = -1;
    t->mask[0] = 1;
}

ms_status ms_tree_path_check(const ms_tree *t, const int32_t *path, int64_t n_path, const char *who) {
    if (n_path < 1 || n_path > t->n || path[0] != 0)
        MS_FAIL(MS_ERR_INVALID, "%s: path of %lld nodes does not fit a %lld-node tree", who, (long long)n_path,
                (long long)t->n);
    for (int64_t k = 1; k < n_path; k++)
        if (path[k] <= 0 || path[k] >= t->n || t->parent[path[k]] != path[k - 1])
            MS_FAIL(MS_ERR_INVALID, "%s: path step %lld (node %d) is not a child of node %d", who, (long long)k,
                    path[k], path[k - 1]);
    return MS_OK;
}

int64_t ms_tree_path_tokens(const ms_tree *t, const int32_t *path, int64_t n_path, int32_t bonus, int32_t *out) {
    int64_t n = 0;
    for (int64_t k = 1; k < n_path; k++) out[n++] = t->token[path[k]];
    out[n++] = bonus;
    return n;
}
