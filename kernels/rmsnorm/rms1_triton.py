"""rms1_triton: RMSNorm forward in Triton, a program per row, the whole row in registers.

What it is
  out[r, :] = x[r, :] / sqrt(mean(x[r, :]^2) + eps) * weight, fp32 math, one rounding of the output
  (rms0_block's semantics). Program r owns row r. A row of at most BLOCK elements is loaded once into
  registers, squared and summed, scaled by the weight and stored: x leaves memory once. A wider row
  walks BLOCK-wide chunks twice, summing squares in the first walk and writing in the second.

Why
  rms0_block reads every row twice and reduces through shared memory by hand. Here the row stays in
  registers and Triton writes the reduction; 16-byte accesses come from the JIT's specialization of
  16-aligned pointers and strides.

Knobs (stages.yaml compile_options.defines override them by name)
  BLOCK=8192    the widest row held in registers, a power of two (tl.arange). 8192 covers models'
                hidden sizes up to 8192; at 8 warps each thread then holds 8192 / 256 = 32 fp32 values
                of x and 32 of the weight, well inside 255 registers.
  num_warps=8   warps per program: 8192 fp16 elements are 1024 16-byte packs, 4 per thread at 8 warps.
"""

import triton
import triton.language as tl

KNOBS = {"BLOCK": 8192, "num_warps": 8}
_STORAGE = {"fp16": "*fp16", "bf16": "*bf16"}
# The arguments Triton's JIT specializes as multiples of 16 for 16-aligned tensors of a width divisible
# by 16 (every model's hidden size): that specialization is what turns the loads into 16-byte ones, so
# the instances compiled ahead of time take it too (as tt.divisibility=16 attributes).
ALIGNED_ARGS = ["x_ptr", "w_ptr", "out_ptr", "x_row_stride", "out_row_stride", "cols"]


@triton.jit
def _rmsnorm_kernel(x_ptr, w_ptr, out_ptr, x_row_stride, out_row_stride, cols, eps,
                    BLOCK: tl.constexpr, ONE_PASS: tl.constexpr):
    row = tl.program_id(0).to(tl.int64)  # row * stride can pass 2^31 elements
    x_row = x_ptr + row * x_row_stride
    out_row = out_ptr + row * out_row_stride
    offsets = tl.arange(0, BLOCK)
    if ONE_PASS:  # cols <= BLOCK: the row stays in registers
        mask = offsets < cols
        x = tl.load(x_row + offsets, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / cols + eps)
        w = tl.load(w_ptr + offsets, mask=mask, other=0.0).to(tl.float32)
        tl.store(out_row + offsets, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)
    else:
        squares = tl.zeros([BLOCK], dtype=tl.float32)
        for start in range(0, cols, BLOCK):
            mask = start + offsets < cols
            x = tl.load(x_row + start + offsets, mask=mask, other=0.0).to(tl.float32)
            squares += x * x
        rstd = tl.rsqrt(tl.sum(squares, axis=0) / cols + eps)
        for start in range(0, cols, BLOCK):
            mask = start + offsets < cols
            x = tl.load(x_row + start + offsets, mask=mask, other=0.0).to(tl.float32)
            w = tl.load(w_ptr + start + offsets, mask=mask, other=0.0).to(tl.float32)
            tl.store(out_row + start + offsets, (x * rstd * w).to(out_ptr.dtype.element_ty), mask=mask)


def _widest_block() -> int:
    block = int(KNOBS["BLOCK"])
    if block < 1 or block & (block - 1):
        raise ValueError(f"rms1_triton: BLOCK must be a power of two, got {block}")
    return block


def compile_specs() -> list[dict]:
    """The instances the lab compiles ahead of time and gates: each dtype, one pass and looped, at the
    widest BLOCK (the most registers a row can take), with the JIT's alignment specialization."""
    specs = []
    for name, pointer in _STORAGE.items():
        signature = {"x_ptr": pointer, "w_ptr": pointer, "out_ptr": pointer, "x_row_stride": "i32",
                     "out_row_stride": "i32", "cols": "i32", "eps": "fp32", "BLOCK": "constexpr",
                     "ONE_PASS": "constexpr"}
        for one_pass, suffix in ((True, ""), (False, "_looped")):
            specs.append(dict(kernel=_rmsnorm_kernel, signature=signature, name=name + suffix,
                              constexprs={"BLOCK": _widest_block(), "ONE_PASS": one_pass},
                              num_warps=KNOBS["num_warps"], divisible_by_16=ALIGNED_ARGS))
    return specs


def forward(x, weight, out, eps, stream=None):
    """RMSNorm of each row of x [rows, cols] into out. Triton launches on torch's current stream, the
    stream the lab passes; `stream` is taken for the CUDA binding's signature."""
    rows, cols = x.shape
    block = min(triton.next_power_of_2(cols), _widest_block())  # KNOBS read now: the lab may replace them
    _rmsnorm_kernel[(rows,)](x, weight, out, x.stride(0), out.stride(0), cols, eps,
                             BLOCK=block, ONE_PASS=cols <= block, num_warps=KNOBS["num_warps"])


def stage_config() -> str:
    return f"rms1_triton BLOCK={KNOBS['BLOCK']} num_warps={KNOBS['num_warps']}"
