/* ms_k_backend_nocuda.c — built instead of cuda/ms_k_cuda_backend.c when
 * there is no CUDA: the one place a build without CUDA answers "no CUDA
 * table" (ms_k_backend_for turns it into MS_ERR_UNSUPPORTED). */
#include "ms_k_backend.h"

const ms_k_backend *ms_k_backend_cuda(void) { return NULL; }
