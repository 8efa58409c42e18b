/* The FMA peak of one core, for benches/python_speed.py's "fraction of FMA peak": twelve
 * independent accumulators (more than an FMA's latency times the FMA pipes, so the loop is
 * bound by throughput alone) updated by f32 fused multiply-adds of the widest vectors the
 * compiler targets (-march=native), and, where the CPU has AVX-512 BF16, by `vdpbf16ps`
 * (32 bf16 products summed into 16 f32 lanes). Prints GFLOP/s per dtype, a multiply-add
 * counted as two. Run one copy per core at once for the machine's peak. */
#include <stdio.h>
#include <time.h>
#ifdef __AVX512BF16__
#include <immintrin.h>
#endif

typedef float vf __attribute__((vector_size(64)));

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Keeps the accumulators in registers and live without storing them. */
#define KEEP()                                                                      \
    __asm__ volatile("" : "+v"(a0), "+v"(a1), "+v"(a2), "+v"(a3), "+v"(a4), "+v"(a5), \
                     "+v"(a6), "+v"(a7), "+v"(a8), "+v"(a9), "+v"(a10), "+v"(a11))
#define EACH(op) op(a0); op(a1); op(a2); op(a3); op(a4); op(a5); \
                 op(a6); op(a7); op(a8); op(a9); op(a10); op(a11)

int main(void) {
    const long n = 20000000;
    vf x, y, a0, a1, a2, a3, a4, a5, a6, a7, a8, a9, a10, a11;
    for (int i = 0; i < 16; i++) x[i] = 0.999f, y[i] = 1e-4f;
    a0 = a1 = a2 = a3 = a4 = a5 = a6 = a7 = a8 = a9 = a10 = a11 = y;
    double t = now();
    for (long i = 0; i < n; i++) {
#define FMA(a) a = a * x + y
        EACH(FMA);
        if ((i & 1023) == 0) KEEP();
    }
    t = now() - t;
    vf s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
    printf("f32 %.1f %g\n", n * 12.0 * 16 * 2 / t / 1e9, (double)s[0]);
#ifdef __AVX512BF16__
    __m512bh bx = (__m512bh)_mm512_set1_epi16(0x3f80), by = (__m512bh)_mm512_set1_epi16(0x3c00);
    t = now();
    for (long i = 0; i < n; i++) {
#define DOT(a) a = (vf)_mm512_dpbf16_ps((__m512)a, bx, by)
        EACH(DOT);
        if ((i & 1023) == 0) KEEP();
    }
    t = now() - t;
    s = a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 + a8 + a9 + a10 + a11;
    printf("bf16 %.1f %g\n", n * 12.0 * 32 * 2 / t / 1e9, (double)s[0]);
#endif
    return 0;
}
