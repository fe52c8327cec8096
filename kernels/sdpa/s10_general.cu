/*
s10_general: s8's kernel on the problems language models hand it: grouped-query
attention, a key length apart from the query length (a prefill after a cached
prefix, cross-attention) and [batch, seq, heads, head_dim] buffers read in place.

What it is
  s8_persistent_split compiled with SDPA_GENERAL_PROBLEM (sdpa_api.h): the same
  two policies, tiles, rings and register splits.
  - Grouped-query attention: query head h reads K/V head h / (heads / kv_heads).
    The producer issues K and V boxes at that head's coordinates; nothing is
    copied or repeated. Work items keep a head's query tiles together and
    heads in order, so the query heads of one group run at the same time on
    neighbouring SMs and read their shared K/V tiles from L2.
  - kv_seq_len != seq_len: the K and V tensor maps have kv_seq_len rows (the
    copy engine zero-fills past them), key tiles run to kv_seq_len, and the
    causal mask is aligned bottom-right as FlashAttention's: query i sees key
    j <= i + kv_seq_len - seq_len. The consumer shifts its rows' positions by
    that offset, so the diagonal test and the skipped tiles above it are s8's.
  - Strided [B, S, H, D] inputs (a model's projections viewed as bhsd): the
    tensor maps and the output stores take any 16-byte-aligned strides; s8's
    code already did, s10 declares it.

Changes vs parent s8_persistent_split, and why
  - s8 serves self-attention of equal heads only; Llama-style prefill (GQA,
    cached prefixes) and diffusion cross-attention are most of what models
    run. The change is in what the kernel reads (kv_len, key_offset, kv_head
    in sdpa_warpspec_config.cuh), not in its schedule: the hypothesis is the
    same speed as s8 on s8's own problems, within noise, and new problems
    taken at s8's efficiency.
  - Without SDPA_GENERAL_PROBLEM those helpers fold to self-attention at
    compile time, so s6-s8 build the SASS they built before.

Composition: Recipe (sdpa_persistent_recipe.cuh), s8's composition without its tunables.

Scope: head_dim 64 and 128, fp16 and bf16, causal or not, kv_heads dividing
  heads, any seq_len and kv_seq_len >= 1 (causal: kv_seq_len >= seq_len),
  16-byte-addressable strides (cudaErrorInvalidValue otherwise, before launch).

Run: stagelab run --stage s10_general --params params/models.yaml
*/
#define SDPA_GENERAL_PROBLEM 1
#include "sdpa_persistent_split.cuh"

SDPA_COMPOSED_STAGE(s10_general)
