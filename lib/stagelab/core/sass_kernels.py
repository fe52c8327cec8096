"""A `cuobjdump -sass` listing kernel by kernel, made comparable across checkouts: the evidence that
two builds hold the same device code (`stagelab same-code`, tools/sass_md5.py,
tools/sass_kernel_match.py).

nvcc names an anonymous namespace `_GLOBAL__N__<8 hex digits>_<file>_<hash>` where the 8 digits
come from the source file's path, so the same stage compiled from two folders differs there
alone: `normalized` makes those names uniform, and nothing else is touched.
"""

from __future__ import annotations

import hashlib
import re

ANONYMOUS_NAMESPACE = re.compile(r"_GLOBAL__N__[0-9a-f]{8}")
ANONYMOUS_NAMESPACE_BYTES = re.compile(rb"_GLOBAL__N__[0-9a-f]{8}")
UNIFORM_NAMESPACE = "_GLOBAL__N__"
FUNCTION = re.compile(r"^\s*Function : (\S+)\s*$")
# A listing of an object says `arch = sm_90a` per embedded cubin, one of a bare cubin `code for sm_90a`.
ARCH = re.compile(r"(?:arch\s*=|code for)\s*(sm_\w+)")
# `/*0a10*/  HGMMA.64x128x16.F32 ... ;  /* 0x... */`: the instruction without its offset and encoding
INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s*(.*?)\s*;?\s*(?:/\*\s*0x[0-9a-f]+\s*\*/)?\s*$")
ENCODING_ONLY = re.compile(r"^\s*/\*\s*0x[0-9a-f]+\s*\*/\s*$")
# The end of a function's body: `..........` closes it, a new cubin's header follows.
BODY_END = re.compile(r"^\s*\.{4,}\s*$")


def normalized(text: str) -> str:
    return ANONYMOUS_NAMESPACE.sub(UNIFORM_NAMESPACE, text)


def normalized_bytes(data: bytes) -> bytes:
    return ANONYMOUS_NAMESPACE_BYTES.sub(UNIFORM_NAMESPACE.encode(), data)


def listing_md5(listing: str) -> str:
    """The md5 of the whole listing, names made uniform (what tools/sass_md5.py prints)."""
    return hashlib.md5(normalized(listing).encode()).hexdigest()


def kernel_bodies(listing: str) -> dict[tuple[str, str], list[str]]:
    """{(kernel name, arch): the lines of its body}, names made uniform, in the listing's order."""
    bodies: dict[tuple[str, str], list[str]] = {}
    arch, current = "", None
    for line in normalized(listing).splitlines():
        if found := ARCH.search(line):
            arch = found[1]
        if function := FUNCTION.match(line):
            current = bodies.setdefault((function[1], arch), [])
        elif current is not None and BODY_END.match(line):
            current = None
        elif current is not None:
            current.append(line.strip())
    return bodies


def kernel_digests(listing: str) -> dict[str, str]:
    """`arch kernel name` -> the md5 of its body as listed: every instruction with its offset and
    its encoding, whose control bits (stalls, barriers, yields) the text leaves out."""
    return {f"{arch} {name}": hashlib.md5("\n".join(lines).encode()).hexdigest()
            for (name, arch), lines in kernel_bodies(listing).items()}


def instruction_digests(listing: str) -> dict[str, str]:
    """Kernel name -> the md5 of its instructions alone (offsets and encodings dropped): the same
    code compiled under another name (a refactor that renames a template) matches by this."""
    digests = {}
    for (name, _arch), lines in kernel_bodies(listing).items():
        instructions = [m[1] for line in lines if not ENCODING_ONLY.match(line) and (m := INSTRUCTION.match(line))]
        digests[name] = hashlib.md5("\n".join(instructions).encode()).hexdigest()
    return digests


def kernel_differences(before: dict[str, str], after: dict[str, str]) -> list[str]:
    """What differs between two builds' kernel_digests, one line each; empty when every kernel
    is in both with the same body."""
    lines = [f"only before: {name}" for name in before if name not in after]
    lines += [f"only after: {name}" for name in after if name not in before]
    lines += [f"changed: {name}" for name in before if name in after and before[name] != after[name]]
    return lines
