/* DT_HD marks static inline functions shared by host C code and CUDA device code
 * (random streams, portable math, fixed-point accumulation). */
#ifndef DT_HD_H
#define DT_HD_H

#if defined(__CUDACC__)
#define DT_HD __host__ __device__
#else
#define DT_HD
#endif

#endif
