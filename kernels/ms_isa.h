/* ms_isa.h — which instruction set the CPU kernels use, chosen once.
 *
 * The levels of one architecture are ordered; each includes the ones below:
 *     x86-64:  scalar < avx2 (AVX2 + FMA + F16C) < avxvnni (AVX2 + AVX-VNNI's
 *              256-bit vpdpbusd) < avx512 (F/BW/VL/DQ + VNNI) < amx (AMX-INT8,
 *              with the tile data granted by the kernel)
 *              avxvnni is a separate CPU feature, not implied by AVX-512 VNNI
 *              (Intel client cores since Alder Lake and Xeons since Sapphire
 *              Rapids have it; AMD Zen 4 has AVX-512 VNNI without it): avx512
 *              and amx include avxvnni only on a CPU that has it.
 *     aarch64: scalar < neon (Advanced SIMD) < dotprod (SDOT/UDOT) < i8mm
 *              (SMMLA/USMMLA/USDOT)
 * The kernels run the highest level the CPU has (x86: cpuid through
 * __builtin_cpu_supports; aarch64: getauxval(AT_HWCAP / AT_HWCAP2)), capped
 * by the environment variable MS_ISA=scalar|avx2|avxvnni|avx512|amx|neon|dotprod|i8mm
 * (tests and benchmarks: an AVX-512 machine can run and time the AVX2 path).
 * A cap above what the CPU has, or a name this architecture does not know,
 * is reported once on stderr and the CPU's own level is used. MS_NO_AMX=1
 * (the older knob) means MS_ISA=avx512. Every level computes the same bits:
 * the scalar twins (cpu/ms_qdot.h, cpu/ms_quant.h) are the specification.
 */
#ifndef MS_ISA_H
#define MS_ISA_H

#include <stdbool.h>

typedef enum {
    MS_ISA_SCALAR = 0,
    MS_ISA_AVX2,
    MS_ISA_AVXVNNI,
    MS_ISA_AVX512,
    MS_ISA_AMX,
    MS_ISA_NEON,
    MS_ISA_DOTPROD,
    MS_ISA_I8MM,
    MS_ISA_COUNT
} ms_isa;

/* The highest level this CPU (and OS) supports, ignoring MS_ISA. */
ms_isa ms_isa_cpu(void);
/* The level the kernels use: ms_isa_cpu() capped by MS_ISA (read once) or
 * by ms_isa_set. */
ms_isa ms_isa_active(void);
/* True when `isa` is at or below `have` on the same architecture (scalar is
 * below everything; avxvnni below avx512 only where the CPU has AVX-VNNI). */
bool ms_isa_includes(ms_isa have, ms_isa isa);
/* "scalar", "avx2", "avxvnni", "avx512", "amx", "neon", "dotprod", "i8mm". */
const char *ms_isa_name(ms_isa isa);
/* The level named `name` (as above); false for an unknown name. */
bool ms_isa_parse(const char *name, ms_isa *out);
/* Tests and benchmarks: use `isa` from now on (it must be included in
 * ms_isa_cpu(); false and no change otherwise). Not while a kernel runs;
 * weights packed under another level must be packed again
 * (ms_qdot_pack_bytes tells whether the new level reads a packed copy). */
bool ms_isa_set(ms_isa isa);

#endif
