/* ms_model.c — implemented next (placeholder so the build configures). */
#include "ms_model.h"
