"""s1_triton: s0 in Triton. Program p computes out = x * sigmoid(x) in fp32 for BLOCK elements.

KNOBS are the stage's constexprs and launch options; stages.yaml's defines override them, and
the lab compiles `compile_specs()` ahead of time (no GPU) for registers, spills and SASS.
"""

import triton
import triton.language as tl

KNOBS = {"BLOCK": 2048, "num_warps": 4}
STORAGE_TYPES = ("fp16", "bf16")


@triton.jit
def _silu(x_ptr, out_ptr, elements, BLOCK: tl.constexpr):
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    tl.store(out_ptr + offsets, (x * tl.sigmoid(x)).to(out_ptr.dtype.element_ty), mask=mask)


def compile_specs():
    return [dict(kernel=_silu, signature={"x_ptr": f"*{t}", "out_ptr": f"*{t}", "elements": "i64", "BLOCK": "constexpr"},
                 constexprs={"BLOCK": KNOBS["BLOCK"]}, num_warps=KNOBS["num_warps"], name=t) for t in STORAGE_TYPES]


def forward(x, out, stream):
    """Launches on torch's current stream (the one `stream` names)."""
    elements = x.numel()
    if elements:
        _silu[(triton.cdiv(elements, KNOBS["BLOCK"]),)](x, out, elements, BLOCK=KNOBS["BLOCK"],
                                                       num_warps=KNOBS["num_warps"])


def stage_config():
    return ", ".join(f"{name}={value}" for name, value in KNOBS.items())
