/* ms_vmode_window.c — vocabulary mode dynamic: the MicroSpec window
 * I = Unique(Suffix(S, W_max)) (docs/architecture.md §5), kept by ms_vocab (ms_vocab.c,
 * the specification of the rule). On a device head the window's twin
 * (kernels/cuda/ms_k_cuda_vocab.cu, through the backend's draft head) is fed
 * the plans begin / update return, so both hold the same window and slots. */
#include "ms_vmode.h"

static ms_status window_create(const ms_head_opts *o, void **st) {
    ms_vocab *w = NULL;
    MS_TRY(ms_vmode_vocab_window(o, false, &w));
    *st = w;
    return MS_OK;
}

static ms_status window_device(void *st, ms_k_head_opts *ko) {
    ko->rows = MS_K_HEAD_WINDOW;
    ko->w_max = ms_vocab_w_max(st);
    return MS_OK;
}

const ms_vmode_i ms_vmode_window = {
    .window = true,
    .create = window_create,
    .free = ms_vmode_vocab_free,
    .device = window_device,
    .begin = ms_vmode_vocab_begin,
    .update = ms_vmode_vocab_update,
    .rows = ms_vmode_vocab_rows,
    .coverage = ms_vmode_vocab_rows,
};
