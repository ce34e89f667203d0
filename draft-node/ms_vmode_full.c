/* ms_vmode_full.c — vocabulary mode full: the head reads all V rows (W
 * itself, slot == id); nothing changes per request or round (the stream is
 * validated, its plan empty). */
#include "ms_vmode.h"

static ms_status full_create(const ms_head_opts *o, void **st) {
    ms_vocab *v = NULL;
    MS_TRY(ms_vmode_vocab_full(o, false, &v));
    *st = v;
    return MS_OK;
}

static ms_status full_device(void *st, ms_k_head_opts *ko) {
    (void)st;
    ko->rows = MS_K_HEAD_FULL;
    return MS_OK;
}

const ms_vmode_i ms_vmode_full = {
    .create = full_create,
    .free = ms_vmode_vocab_free,
    .device = full_device,
    .begin = ms_vmode_vocab_begin,
    .update = ms_vmode_vocab_update,
    .rows = ms_vmode_vocab_rows,
    .coverage = ms_vmode_vocab_rows,
};
