/* ms_isa.c — the CPU's instruction-set level and the MS_ISA cap (ms_isa.h). */
#include "ms_isa.h"

#include <stdlib.h>
#include <string.h>

#include "ms_common.h"

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define ISA_X86 1
#elif defined(__aarch64__) && defined(__linux__)
#include <sys/auxv.h>
#define ISA_ARM 1
#endif

static const char *const k_names[MS_ISA_COUNT] = {"scalar", "avx2", "avxvnni", "avx512",
                                                      "amx",    "neon", "dotprod", "i8mm"};

const char *ms_isa_name(ms_isa isa) { return isa >= 0 && isa < MS_ISA_COUNT ? k_names[isa] : "?"; }

bool ms_isa_parse(const char *name, ms_isa *out) {
    for (int i = 0; name && i < MS_ISA_COUNT; i++)
        if (strcmp(name, k_names[i]) == 0) {
            *out = (ms_isa)i;
            return true;
        }
    return false;
}

static bool is_arm(ms_isa isa) { return isa >= MS_ISA_NEON && isa <= MS_ISA_I8MM; }

static bool g_avxvnni; /* the CPU has AVX-VNNI (set by detect, read after ms_isa_cpu) */

bool ms_isa_includes(ms_isa have, ms_isa isa) {
    if (isa == MS_ISA_SCALAR) return true;
    if (have == MS_ISA_SCALAR || is_arm(have) != is_arm(isa)) return false;
    if (isa == MS_ISA_AVXVNNI && have > MS_ISA_AVXVNNI) { /* a feature of its own, not implied by AVX-512 */
        (void)ms_isa_cpu();
        return __atomic_load_n(&g_avxvnni, __ATOMIC_ACQUIRE);
    }
    return isa <= have;
}

static ms_isa detect(void) {
    ms_isa l = MS_ISA_SCALAR;
#ifdef ISA_X86
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) {
        unsigned a = 0, b = 0, c = 0, d = 0;
        /* F16C: cpuid 1, ecx bit 29 (not among __builtin_cpu_supports' names in gcc 12) */
        if (__get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29))) l = MS_ISA_AVX2;
        /* AVX-VNNI: cpuid 7.1, eax bit 4 */
        if (l == MS_ISA_AVX2 && __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 4))) {
            __atomic_store_n(&g_avxvnni, true, __ATOMIC_RELEASE);
            l = MS_ISA_AVXVNNI;
        }
    }
    if (l >= MS_ISA_AVX2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni"))
        l = MS_ISA_AVX512;
    unsigned a = 0, b = 0, c = 0, d = 0;
    if (l == MS_ISA_AVX512 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (d & (1u << 24)) && (d & (1u << 25))) {
        /* ARCH_REQ_XCOMP_PERM (0x1023) for XFEATURE_XTILEDATA (18): process-wide */
        if (syscall(SYS_arch_prctl, 0x1023, 18) == 0) l = MS_ISA_AMX;
        else MS_LOG_DEBUG("isa: the kernel refused AMX tile data; AVX-512 VNNI only");
    }
#elif defined(ISA_ARM)
    const unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    if (hw & (1ul << 1)) l = MS_ISA_NEON;                       /* HWCAP_ASIMD */
    if (l == MS_ISA_NEON && (hw & (1ul << 20))) l = MS_ISA_DOTPROD; /* HWCAP_ASIMDDP */
    if (l == MS_ISA_DOTPROD && (hw2 & (1ul << 13))) l = MS_ISA_I8MM; /* HWCAP2_I8MM */
#endif
    return l;
}

static int g_cpu = -1, g_active = -1;

ms_isa ms_isa_cpu(void) {
    int l = __atomic_load_n(&g_cpu, __ATOMIC_ACQUIRE);
    if (l < 0) {
        l = (int)detect();
        __atomic_store_n(&g_cpu, l, __ATOMIC_RELEASE);
    }
    return (ms_isa)l;
}

ms_isa ms_isa_active(void) {
    int l = __atomic_load_n(&g_active, __ATOMIC_ACQUIRE);
    if (l >= 0) return (ms_isa)l;
    const ms_isa cpu = ms_isa_cpu();
    ms_isa want = cpu;
    const char *env = getenv("MS_ISA"), *noamx = getenv("MS_NO_AMX");
    if (env && *env) {
        ms_isa cap;
        if (!ms_isa_parse(env, &cap))
            MS_LOG_WARN("MS_ISA=%s: not a level (scalar, avx2, avxvnni, avx512, amx, neon, dotprod, i8mm); using %s",
                        env, ms_isa_name(cpu));
        else if (!ms_isa_includes(cpu, cap))
            MS_LOG_WARN("MS_ISA=%s: this CPU's level is %s, which does not include it; using %s", env,
                        ms_isa_name(cpu), ms_isa_name(cpu));
        else want = cap;
    } else if (noamx && *noamx && strcmp(noamx, "0") != 0 && cpu == MS_ISA_AMX) {
        want = MS_ISA_AVX512;
    }
    int expect = -1;
    if (__atomic_compare_exchange_n(&g_active, &expect, (int)want, false, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
        MS_LOG_DEBUG("isa: CPU %s, kernels %s", ms_isa_name(cpu), ms_isa_name(want));
    return (ms_isa)__atomic_load_n(&g_active, __ATOMIC_ACQUIRE);
}

bool ms_isa_set(ms_isa isa) {
    if (!ms_isa_includes(ms_isa_cpu(), isa)) return false;
    __atomic_store_n(&g_active, (int)isa, __ATOMIC_RELEASE);
    return true;
}
