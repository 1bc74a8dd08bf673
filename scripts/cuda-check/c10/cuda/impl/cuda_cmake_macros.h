#pragma once
// Only for scripts/check-cuda.sh: the header a CUDA libtorch build generates and Debian's
// CPU-only libtorch-dev does not ship; c10/cuda/CUDAMacros.h includes it. A real CUDA build
// uses its libtorch's own copy and never sees this folder.
#define C10_CUDA_BUILD_SHARED_LIBS
