"""pykern: GPU kernels as typed Python functions, compiled through LLVM for AMDGPU, CUDA and the host.

    import pykern as pk
    from pykern import f32, usize, Ptr

    @pk.kernel
    def scale(n: usize, a: f32, x: Ptr[f32]):
        for i in pk.grid_stride(n):
            x[i] = a * x[i]
"""
from .version import __version__
from .errors import CompileError, DeviceError, LaunchError, PykernError
from .ir.types import (ALL_DTYPES, ConstPtr, DType, Ptr, TypeVar, bf16, bool_, f8e4m3, f16, f32, f64, i8, i16,
                       i32, i64, u8, u16, u32, u64, usize)
from .lang.builtins import (assume_aligned, atomic, bitcast, block_dim, block_idx, ceil, copysign, dot4_i8,
                            dot4_u8i8, fabs, fast_exp2, fast_rcp, floor,
                            fma, fmax, fmin, global_id, grid_dependency_wait, grid_dim, grid_stride, is_aligned, isinf,
                            isnan, lane_id, launch_dependents, load, local, maximum, minimum, mma, parallel_range, rint,
                            select, shared, sqrt, static_range, store,
                            syncthreads, thread_idx, threadfence, threadfence_block, threadfence_system, tile_bytes,
                            trunc, wave, wave_size)
from .lang.kernel import FuncDef, KernelDef, KernelInstance, Module, PerTarget, func, kernel, per_target
from .runtime.devices import device, from_dlpack
from .runtime import dispatch as _dispatch  # noqa: F401 - installs the launch path of kernel[grid, block]
from . import math  # noqa: E402 - the math library is written in the language, so it comes last
from . import config as _config

if _config.verbose():  # PYKERN_VERBOSE=1: each compile's time and cache hit or miss on stderr
    _config.enable_logging()
