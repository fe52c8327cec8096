"""V as the INT8 stage's P.V reads it: e4m3, transposed, keys permuted per group of 32, padded.

The stage computes P.V on e4m3 wgmma with P in registers (the A operand) and V^T in shared memory
(the B operand, K-major: one row per channel, keys along the row). P's register fragment is the
Q.K^T accumulator converted in place, and the accumulator's column order is not the A operand's k
order: the element an A fragment holds at k (0..31 within one k32 slice) is the score of key
key_of(k) (kernels/sdpa/fp8/wgmma8.cuh: fp8_key_of, and tests/test_fp8_stage.py, which derives it
from the fragment layouts). So V^T's column 32 g + k must hold key 32 g + key_of(k): then P.V over
the permuted V^T is P.V, with no shuffle of P in the kernel.

The kernel loads V^T by TMA in rows of kv_seq_len rounded up to VT_PAD keys (16 bytes, TMA's
stride unit); columns whose key does not exist (past kv_seq_len, in a last partial group) hold
zeros, which add nothing to P.V whatever P is there. A 32-key group may run past the padded row:
those columns are not stored, and TMA fills them with zeros.
"""

from __future__ import annotations

import torch

from ....core.errors import InputError
from ..fp8.quantize import E4M3

KEY_GROUP = 32  # keys of one e4m3 wgmma k slice (kWgmmaK8), the permutation's period
VT_PAD = 16  # V^T rows are padded to a multiple of this many keys (16 bytes: TMA's stride unit)


def key_of(k):
    """The key (0..31) the logical k (0..31) of P's A fragment stands for: fp8_key_of. Works on ints
    and on integer tensors elementwise."""
    return 16 * (k // 16) + 8 * ((k % 4) // 2) + 2 * ((k % 16) // 4) + (k % 2)


def padded_keys(kv_seq_len: int) -> int:
    """V^T's row length: kv_seq_len rounded up to VT_PAD."""
    return -(-kv_seq_len // VT_PAD) * VT_PAD


def vt_keys(kv_seq_len: int, device: torch.device | str = "cpu") -> torch.Tensor:
    """The key each column of V^T holds (int64 [padded_keys]); a value >= kv_seq_len marks a zero column."""
    columns = torch.arange(padded_keys(kv_seq_len), device=device)
    return KEY_GROUP * (columns // KEY_GROUP) + key_of(columns % KEY_GROUP)


def vt_operand(v8: torch.Tensor) -> torch.Tensor:
    """V^T for the INT8 stage: float8_e4m3fn [B, Hkv, D, padded_keys(Sk)], contiguous, from e4m3 V
    [B, Hkv, Sk, D] (any strides, a bshd view too), with vt[b, h, d, c] = v8[b, h, vt_keys[c], d]
    and 0 where vt_keys[c] >= Sk. Two torch ops on V's device (a gather and a masked fill)."""
    if not isinstance(v8, torch.Tensor) or v8.dtype != E4M3 or v8.dim() != 4:
        what = f"{v8.dtype} of shape {tuple(v8.shape)}" if isinstance(v8, torch.Tensor) else type(v8).__name__
        raise InputError(f"vt_operand takes e4m3 V [batch, kv_heads, kv_seq_len, head_dim], got {what}")
    kv_seq_len = v8.shape[2]
    if kv_seq_len < 1:
        raise InputError("vt_operand: V has no keys (kv_seq_len 0)")
    keys = vt_keys(kv_seq_len, v8.device)
    # The bytes are gathered (index_select and masked_fill need not know e4m3); e4m3's 0x00 is +0.
    raw = v8.view(torch.uint8).transpose(2, 3)
    vt = raw.index_select(3, keys.clamp(max=kv_seq_len - 1)).contiguous()
    vt.masked_fill_(keys >= kv_seq_len, 0)
    return vt.view(E4M3)
