/* ms_k_cuda.cu — device discovery for the CUDA backend. */
#include "ms_k_cuda.h"

#include <cuda_runtime.h>
#include <stdio.h>

extern "C" int ms_k_cuda_device_count(void) {
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess) {
        cudaGetLastError(); /* clear the sticky "no driver" error */
        return 0;
    }
    return n;
}

extern "C" ms_status ms_k_cuda_device_info(int dev, char *buf, size_t cap) {
    cudaDeviceProp p;
    cudaError_t e = cudaGetDeviceProperties(&p, dev);
    if (e != cudaSuccess) {
        ms_log_msg(MS_LOG_ERROR, __FILE__, __LINE__, "cuda device %d: %s", dev, cudaGetErrorString(e));
        return MS_ERR_NOT_FOUND;
    }
    snprintf(buf, cap, "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
             (double)p.totalGlobalMem / (1024.0 * 1024.0 * 1024.0));
    return MS_OK;
}
