/* ms_k_cuda.h — CUDA side of the op table (the CUDA issue fills in every op).
 * This header includes no CUDA header so plain C code can call it. */
#ifndef MS_K_CUDA_H
#define MS_K_CUDA_H

#include "ms_common.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Number of usable CUDA devices; 0 when there is no driver or no device
 * (never an error: callers report GPU tests as skipped). */
int ms_k_cuda_device_count(void);
/* Name and memory of device `dev` into buf; MS_ERR_NOT_FOUND if absent. */
ms_status ms_k_cuda_device_info(int dev, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif

#endif
