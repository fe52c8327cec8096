#!/usr/bin/env bash
# FlashAttention-4's wheels for an offline GPU machine, cut into parts that each fit one
# device call's carry (64 MiB; nvidia-cutlass-dsl-libs-cu13 alone is 92 MB).
#   here:    tools/fa4_wheels.sh                 -> wheelhouse-fa4/part-aa, part-ab, ...
#   device:  one call per part, back to back while the machine is warm (30 s):
#            carry ["wheelhouse-fa4/part-aa"], command: bash tools/fa4_wheels.sh collect
#            ... the same for each part; after the last:  bash tools/fa4_wheels.sh install
#            then the batch call exports STAGELAB_FA4_SITE=/tmp/fa4site (the fa4 contender
#            adds it with site.addsitedir: the cutlass package comes in through a .pth file).
# Tried on an H100 2026-11-23: flash-attn-4 4.0.0b9 does not import with cutlass-dsl 4.8.1
# (cute.core.ThrMma is gone); 4.0.0b36 is pinned instead.
set -euo pipefail
PARTS_DIR=/tmp/fa4-parts
SITE_DIR=/tmp/fa4site
case "${1:-download}" in
  download)
    out="${2:-wheelhouse-fa4}"
    rm -rf "$out" && mkdir -p "$out/wheels"
    python3 -m pip download -q --pre --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_24_x86_64 --platform any \
      -r tools/fa4-wheels.txt -d "$out/wheels"
    tar cf - -C "$out" wheels | split -b "${PART_MB:-40}M" - "$out/part-"
    rm -rf "$out/wheels"
    ls -la "$out" ;;
  collect)
    mkdir -p "$PARTS_DIR" && cp wheelhouse-fa4/part-* "$PARTS_DIR"/ && ls -la "$PARTS_DIR" ;;
  install)
    rm -rf /tmp/fa4-unpacked && mkdir -p /tmp/fa4-unpacked
    cat "$PARTS_DIR"/part-* | tar xf - -C /tmp/fa4-unpacked
    python3 -m pip install -q --no-index --no-deps --target "$SITE_DIR" /tmp/fa4-unpacked/wheels/*.whl
    python3 -c "import site; site.addsitedir('$SITE_DIR'); from flash_attn.cute import flash_attn_func; print('fa4 ok')" ;;
  *) echo "usage: $0 [download [DIR] | collect | install]" >&2; exit 2 ;;
esac
