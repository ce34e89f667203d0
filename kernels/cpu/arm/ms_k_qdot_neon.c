/* placeholder */
#include "ms_k_qdot_int.h"
void ms_qd_fill_neon(qd_kernels *k, ms_isa level) { (void)k; (void)level; }
