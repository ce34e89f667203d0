/* Mutation harness for issue 36.11: test_cuda_xfer.c's main with a device
 * probe that crashes (STUB_PROBE=segv), hangs (hang) or counts N devices. */
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "ms_xfer.h"
bool ms_xfer_kind_built(ms_xfer_kind k) { (void)k; return true; }
int ms_k_cuda_device_count(void);
int ms_k_cuda_device_count(void) {
    const char *m = getenv("STUB_PROBE");
    if (m && !strcmp(m, "segv")) raise(SIGSEGV);
    if (m && !strcmp(m, "hang")) sleep(1000);
    return m ? atoi(m) : 0;
}
