/* qdot_bench.c — one ms_qdot_linear product, best of 5 (issue 31). Build from the repository root:
 * gcc -O2 -std=c11 -D_POSIX_C_SOURCE=200809L -D_DEFAULT_SOURCE -Icommon -Ikernels -o /tmp/qbench THIS build/dev/kernels/libms_kernels.a build/dev/common/libms_common.a -lopenblas -lm -lpthread -lmvec
 * MS_ISA=avx2 QB_COPIES=1 /tmp/qbench q4|q6|q5|q8 M K N THREADS */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include "ms_qdot.h"
#include "ms_pool.h"
#include "ms_isa.h"
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
int main(int argc,char**argv){
  ms_dtype t = argc>1 && !strcmp(argv[1],"q6")?MS_DTYPE_Q6_K: argc>1&&!strcmp(argv[1],"q8")?MS_DTYPE_Q8_0: argc>1&&!strcmp(argv[1],"q5")?MS_DTYPE_Q5_0:MS_DTYPE_Q4_K;
  int64_t m = argc>2?atoll(argv[2]):8960, k = argc>3?atoll(argv[3]):1536; int n = argc>4?atoi(argv[4]):1; int th = argc>5?atoi(argv[5]):1;
  ms_pool_set_threads(th);
  size_t rb; ms_dtype_row_bytes(t,k,&rb); size_t bytes=rb*m;
  /* several copies so the weights come from DRAM */
  int copies = getenv("QB_COPIES")?atoi(getenv("QB_COPIES")):(int)(200e6/bytes)+1; if(copies>64)copies=64;
  ms_qweight w[64]; uint8_t *d[64];
  for(int c=0;c<copies;c++){ d[c]=malloc(bytes); for(size_t i=0;i<bytes;i++) d[c][i]=(uint8_t)(i*2654435761u>>13);
    /* sane f16 scales: zero the top bits of every 2-byte word would break nothing; keep random */
    w[c]=ms_qweight_view(t,d[c],m,k); ms_qdot_pack(&w[c]); }
  float *x=malloc(sizeof(float)*n*k); for(int64_t i=0;i<n*k;i++) x[i]=(float)((i*7919)%1000)/500.0f-1.0f;
  ms_q8_act a; ms_q8_act_alloc(&a,n,k); ms_q8_quantize(&a,x,n,k);
  float *y=malloc(sizeof(float)*n*m);
  for(int c=0;c<copies;c++) ms_qdot_linear(y,&a,&w[c],NULL);
  double best=1e9;
  for(int r=0;r<5;r++){ double t0=now(); for(int c=0;c<copies;c++) ms_qdot_linear(y,&a,&w[c],NULL); double dt=(now()-t0)/copies; if(dt<best)best=dt; }
  printf("%s %s m=%lld k=%lld n=%d th=%d: %.3f ms, %.1f GB/s (%d copies)\n", ms_qdot_path(t), ms_dtype_name(t),(long long)m,(long long)k,n,th,best*1e3,bytes/best/1e9,copies);
  return 0;
}
