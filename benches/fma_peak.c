/* The FMA peak of one core, for the benchmarks' "fraction of FMA peak": independent
 * accumulators (more than an FMA's latency times the FMA pipes, so the loop is bound by
 * throughput alone; twenty-four of 16 lanes with AVX-512, twelve of 8 with AVX2, which has 16
 * registers) updated by f32 fused multiply-adds of the widest vectors the compiler targets
 * (-march=native), and, where the CPU has AVX-512 BF16, by `vdpbf16ps` (32 bf16 products
 * summed into 16 f32 lanes; with twelve accumulators it measured ~6% under this on Zen 5).
 * Prints GFLOP/s per dtype, a multiply-add counted as two. Run one copy per core at once for
 * the machine's peak. */
#include <stdio.h>
#include <time.h>
#ifdef __AVX512BF16__
#include <immintrin.h>
#endif

#ifdef __AVX512F__
#define LANES 16
#define ACCS 24
#else
#define LANES 8
#define ACCS 12
#endif
typedef float vf __attribute__((vector_size(LANES * 4)));

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Keeps the accumulators in registers and live without storing them (an asm statement
 * takes at most 30 operands: two). */
#define REGS_A "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11)
#define EACH_A(op)                                                                       \
    do {                                                                                 \
        op(a0); op(a1); op(a2); op(a3); op(a4); op(a5); op(a6); op(a7);                  \
        op(a8); op(a9); op(a10); op(a11);                                                \
    } while (0)
#define SUM_A (a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11)
#if ACCS == 24
#define REGS_B "+v"(a12), "+v"(a13), "+v"(a14), "+v"(a15), "+v"(a16), "+v"(a17), "+v"(a18), "+v"(a19), "+v"(a20), "+v"(a21), "+v"(a22), "+v"(a23)
#define KEEP()                                                                           \
    do {                                                                                 \
        __asm__ volatile("" : REGS_A);                                                   \
        __asm__ volatile("" : REGS_B);                                                   \
    } while (0)
#define EACH(op)                                                                         \
    do {                                                                                 \
        EACH_A(op);                                                                      \
        op(a12); op(a13); op(a14); op(a15); op(a16); op(a17); op(a18); op(a19);          \
        op(a20); op(a21); op(a22); op(a23);                                              \
    } while (0)
#define SUM (SUM_A + a12 + a13 + a14 + a15 + a16 + a17 + a18 + a19 + a20 + a21 + a22 + a23)
#else
#define KEEP() __asm__ volatile("" : REGS_A)
#define EACH(op) EACH_A(op)
#define SUM SUM_A
#endif

int main(void) {
    const long n = 10000000;
    vf x, y, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11, a12, a13, a14, a15, a16, a17, a18, a19, a20, a21, a22, a23;
    for (int i = 0; i < LANES; i++) x[i] = 0.999f, y[i] = 1e-4f;
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = a10 = a11 = a12 = a13 = a14 = a15 = a16 = a17 = a18 = a19 = a20 = a21 = a22 = a23 = y;
    double t = now();
    for (long i = 0; i < n; i++) {
#define FMA(a) a = a * x + y
        EACH(FMA);
        if ((i & 1023) == 0) KEEP();
    }
    t = now() - t;
    vf s = SUM;
    printf("f32 %.1f %g\n", n * (double)ACCS * LANES * 2 / t / 1e9, (double)s[0]);
#ifdef __AVX512BF16__
    __m512bh bx = (__m512bh)_mm512_set1_epi16(0x3f80), by = (__m512bh)_mm512_set1_epi16(0x3c00);
    t = now();
    for (long i = 0; i < n; i++) {
#define DOT(a) a = (vf)_mm512_dpbf16_ps((__m512)a, bx, by)
        EACH(DOT);
        if ((i & 1023) == 0) KEEP();
    }
    t = now() - t;
    s = SUM;
    printf("bf16 %.1f %g\n", n * 24.0 * 32 * 2 / t / 1e9, (double)s[0]);
#endif
    return 0;
}
