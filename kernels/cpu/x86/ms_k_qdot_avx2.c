/* placeholder, filled below */
#include "ms_k_qdot_int.h"
void ms_qd_fill_avx2(qd_kernels *k) { (void)k; }
