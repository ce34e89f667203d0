/* ms_xfer_nodev.c — built instead of ms_xfer_cuda.c when there is no CUDA:
 * no device transport table (ms_xfer_dev.h), so only host frames exist. */
#include "ms_xfer_dev.h"

const ms_xfer_dev_ops *ms_xfer_dev_table(void) { return NULL; }
