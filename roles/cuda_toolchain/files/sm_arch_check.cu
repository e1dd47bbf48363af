// blackwell.sglang cuda_toolchain compile proof -- compiled, never launched (no GPU needed).
// Proves: nvcc drives the host compiler, finds CCCL (include/cccl on CUDA 13) and the FP4 header, and really
// compiled the device code for the arch-specific target (-gencode arch=compute_XXXa,code=sm_XXXa): the #error
// fires for a plain sm_XXX target, which lacks FP4 MMA and the e2m1 conversion.
#include <cstdio>
#include <cuda/std/utility>
#include <cuda_fp4.h>

#ifndef BLACKWELL_EXPECT_ARCH_SPECIFIC
#error "compile with -DBLACKWELL_EXPECT_ARCH_SPECIFIC=<major><minor>0, e.g. 1200 for sm_120a"
#endif

__global__ void to_fp4(const float* in, __nv_fp4_e2m1* out, int n) {
#if defined(__CUDA_ARCH__)
#if !defined(__CUDA_ARCH_SPECIFIC__) || __CUDA_ARCH_SPECIFIC__ != BLACKWELL_EXPECT_ARCH_SPECIFIC
#error "device code was not compiled for the expected arch-specific target"
#endif
#endif
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  cuda::std::pair<float, int> item(in[i], i);
  if (item.second < n) out[item.second] = __nv_fp4_e2m1(item.first);
}

int main() {
  std::printf("sm_%d arch-specific compile check: ok\n", BLACKWELL_EXPECT_ARCH_SPECIFIC / 10);
  return 0;
}
