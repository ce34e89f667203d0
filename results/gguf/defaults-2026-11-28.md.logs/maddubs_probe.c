/* maddubs_probe.c — throughput of vpmaddubsw / vpaddw on this CPU (issue 31, 8-row verify bound).
 * gcc -O2 -mavx2 -o /tmp/mb maddubs_probe.c && for i in 1 2 3 4 5; do /tmp/mb; done  (best of 5, TSC ticks per instruction) */
#include <immintrin.h>
#include <stdio.h>
#include <x86intrin.h>
#define N 10000000L
__attribute__((target("avx2"),noinline)) static __m256i t_maddubs(__m256i a, __m256i b){
  __m256i r0=a,r1=a,r2=a,r3=a,r4=a,r5=a,r6=a,r7=a;
  for(long i=0;i<N;i++){
    __asm__ volatile(
     "vpmaddubsw %8,%0,%0\n vpmaddubsw %8,%1,%1\n vpmaddubsw %8,%2,%2\n vpmaddubsw %8,%3,%3\n"
     "vpmaddubsw %8,%4,%4\n vpmaddubsw %8,%5,%5\n vpmaddubsw %8,%6,%6\n vpmaddubsw %8,%7,%7\n"
     :"+x"(r0),"+x"(r1),"+x"(r2),"+x"(r3),"+x"(r4),"+x"(r5),"+x"(r6),"+x"(r7):"x"(b));
  }
  return _mm256_add_epi16(_mm256_add_epi16(_mm256_add_epi16(r0,r1),_mm256_add_epi16(r2,r3)),_mm256_add_epi16(_mm256_add_epi16(r4,r5),_mm256_add_epi16(r6,r7)));
}
__attribute__((target("avx2"),noinline)) static __m256i t_addw(__m256i a, __m256i b){
  __m256i r0=a,r1=a,r2=a,r3=a,r4=a,r5=a,r6=a,r7=a;
  for(long i=0;i<N;i++){
    __asm__ volatile(
     "vpaddw %8,%0,%0\n vpaddw %8,%1,%1\n vpaddw %8,%2,%2\n vpaddw %8,%3,%3\n"
     "vpaddw %8,%4,%4\n vpaddw %8,%5,%5\n vpaddw %8,%6,%6\n vpaddw %8,%7,%7\n"
     :"+x"(r0),"+x"(r1),"+x"(r2),"+x"(r3),"+x"(r4),"+x"(r5),"+x"(r6),"+x"(r7):"x"(b));
  }
  return _mm256_add_epi16(r0,r7);
}
__attribute__((target("avx2"),noinline)) static __m256i t_mix(__m256i a, __m256i b){
  __m256i r0=a,r1=a,r2=a,r3=a,r4=a,r5=a,r6=a,r7=a;
  for(long i=0;i<N;i++){
    __asm__ volatile(
     "vpmaddubsw %8,%0,%0\n vpaddw %8,%1,%1\n vpmaddubsw %8,%2,%2\n vpaddw %8,%3,%3\n"
     "vpmaddubsw %8,%4,%4\n vpaddw %8,%5,%5\n vpmaddubsw %8,%6,%6\n vpaddw %8,%7,%7\n"
     :"+x"(r0),"+x"(r1),"+x"(r2),"+x"(r3),"+x"(r4),"+x"(r5),"+x"(r6),"+x"(r7):"x"(b));
  }
  return _mm256_add_epi16(r0,r7);
}
static __m256i mem[64] __attribute__((aligned(64)));
__attribute__((target("avx2"),noinline)) static __m256i t_maddm(__m256i a, __m256i b){
  __m256i r0=a,r1=a,r2=a,r3=a,r4=a,r5=a,r6=a,r7=a;
  for(long i=0;i<N;i++){
    __asm__ volatile(
     "vpmaddubsw 0(%8),%0,%0\n vpmaddubsw 32(%8),%1,%1\n vpmaddubsw 64(%8),%2,%2\n vpmaddubsw 96(%8),%3,%3\n"
     "vpmaddubsw 128(%8),%4,%4\n vpmaddubsw 160(%8),%5,%5\n vpmaddubsw 192(%8),%6,%6\n vpmaddubsw 224(%8),%7,%7\n"
     :"+x"(r0),"+x"(r1),"+x"(r2),"+x"(r3),"+x"(r4),"+x"(r5),"+x"(r6),"+x"(r7):"r"(mem));
  }
  return _mm256_add_epi16(r0,r7);
}
int main(void){
  __m256i a=_mm256_set1_epi8(1),b=_mm256_set1_epi8(1); volatile int sink;
  struct {const char*n; __m256i(*f)(__m256i,__m256i);} T[]={{"maddubs",t_maddubs},{"addw",t_addw},{"mix",t_mix},{"maddubs_mem",t_maddm}};
  for(int k=0;k<4;k++){ unsigned long long t0=__rdtsc(); __m256i r=T[k].f(a,b); unsigned long long t1=__rdtsc(); sink=_mm256_extract_epi32(r,0);
    printf("%-12s %.3f tsc ticks per instr\n",T[k].n,(double)(t1-t0)/(N*8.0)); }
  return 0;
}
