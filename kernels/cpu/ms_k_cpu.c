/* placeholder */
#include "ms_kernels.h"
