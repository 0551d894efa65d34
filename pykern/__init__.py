"""pykern: GPU kernels as typed Python functions, compiled through LLVM for AMDGPU, CUDA and the host."""
