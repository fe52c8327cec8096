"""s2_cute: s1 in CuTe DSL (FlashAttention-4's language). Thread t of block b takes the VEC = 16 bytes
/ element size contiguous elements of vector b * THREADS + t with one 16-byte load and one 16-byte
store, fp32 math; the last elements, fewer than a vector, go one per thread of block 0.

KNOBS: THREADS, a block's threads; stages.yaml's defines override them. The lab compiles
`compile_specs()` ahead of time (no GPU) for registers, spills and SASS; `forward` compiles the
same function with the same fake arguments for the GPU it runs on, once per dtype, so the kernel
that runs is the one the lab reported on.
"""

import cutlass
import cutlass.cute as cute
from cutlass.cute.runtime import make_fake_compact_tensor, make_fake_stream

KNOBS = {"THREADS": 256}
STORAGE_TYPES = {"fp16": cutlass.Float16, "bf16": cutlass.BFloat16}
ALIGN = 16  # bytes the tensors' data must be aligned to: one vector (torch's allocations are)


@cute.jit
def _silu_f32(v):
    return v / (1.0 + cute.math.exp(-v, fastmath=True))


@cute.kernel
def _silu_kernel(mX: cute.Tensor, mO: cute.Tensor, threads: cutlass.Constexpr, vec: cutlass.Constexpr):
    tidx, _, _ = cute.arch.thread_idx()
    bidx, _, _ = cute.arch.block_idx()
    elements = cute.size(mX)
    whole = elements // vec  # vectors of VEC elements; the rest goes one element at a time
    i = bidx * threads + tidx
    if i < whole:
        gX, gO = cute.zipped_divide(mX, (vec,)), cute.zipped_divide(mO, (vec,))
        gO[(None, i)].store(_silu_f32(gX[(None, i)].load().to(cutlass.Float32)).to(mO.element_type))
    if i < elements - whole * vec:
        j = whole * vec + i
        mO[j] = _silu_f32(mX[j].to(cutlass.Float32)).to(mO.element_type)


@cute.jit
def silu(mX: cute.Tensor, mO: cute.Tensor, stream, threads: cutlass.Constexpr):
    vec = ALIGN * 8 // mX.element_type.width
    _silu_kernel(mX, mO, threads, vec).launch(grid=[cute.size(mX) // vec // threads + 1, 1, 1],
                                              block=[threads, 1, 1], stream=stream)


def _fake_args(dtype):
    """What silu is compiled for: x and out of one dynamic length (a 32-bit count, as cute's
    from_dlpack gives a torch tensor's), 16-byte aligned, on a stream; THREADS as a constant."""
    elements = cute.sym_int()
    x, out = (make_fake_compact_tensor(dtype, (elements,), assumed_align=ALIGN) for _ in range(2))
    return [x, out, make_fake_stream(), KNOBS["THREADS"]]


def compile_specs():
    return [dict(function=silu, args=_fake_args(dtype), name=name) for name, dtype in STORAGE_TYPES.items()]


_COMPILED = {}  # torch dtype -> silu compiled for this GPU


def forward(x, out, stream):
    """Launches on the stream torch's current one names (`stream`, an integer). Cute takes a torch
    tensor as from_dlpack(t).mark_layout_dynamic() (its own adapter), so x and out go in flat."""
    import cuda.bindings.driver as cuda
    import torch

    if x.numel() == 0:
        return
    if x.data_ptr() % ALIGN or out.data_ptr() % ALIGN:
        raise ValueError(f"s2_cute: x and out must be {ALIGN}-byte aligned")
    if x.dtype not in _COMPILED:
        dtype = {torch.float16: cutlass.Float16, torch.bfloat16: cutlass.BFloat16}.get(x.dtype)
        if dtype is None:
            raise ValueError(f"s2_cute: dtype must be float16 or bfloat16, got {x.dtype}")
        _COMPILED[x.dtype] = cute.compile(silu, *_fake_args(dtype))
    _COMPILED[x.dtype](x.view(-1), out.view(-1), cuda.CUstream(stream))


def stage_config():
    return ", ".join(f"{name}={value}" for name, value in KNOBS.items())
