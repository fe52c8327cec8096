"""Digests of what a build made, comparable across two checkouts of a family (`stagelab same-code`):
the device image (every section of each cubin: code, constant banks, the kernels' attributes),
the host code of a stage's object (its launcher: which kernel, grid and shared memory a problem
gets) and the family's binding as the compiler sees it.

Each digest leaves out only what the checkout's folder changes in the same code: the names nvcc
gives anonymous namespaces (core.sass_kernels.normalized) and, in the binding, the family
folder's path (`__FILE__` in torch's checks).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import struct
import subprocess
from pathlib import Path

from .errors import BuildError
from .registry import Registry
from .sass import cuobjdump
from .sass_kernels import normalized, normalized_bytes

TOOL_TIMEOUT_S = 300
# Host sections whose bytes decide what the code reads (tables, strings); their relocations are in `objdump -r`.
DATA_SECTION_PREFIXES = (".rodata", ".data")
SHT_NOBITS = 8  # a section with no bytes in the file (.bss)


def _run(cmd: list[str], what: str, **kwargs) -> str:
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=TOOL_TIMEOUT_S, check=False, **kwargs)
    except OSError as exc:
        raise BuildError(f"{what}: cannot run {cmd[0]}", str(exc)) from exc
    if proc.returncode != 0:
        raise BuildError(f"{what}: {Path(cmd[0]).name} exited {proc.returncode}", proc.stderr[-4000:])
    return proc.stdout


def device_image_md5(files: list[Path]) -> str:
    """md5 of `cuobjdump -elf` of each file (a stage's object, or a Python stage's cubins), in order."""
    tool = cuobjdump()
    env = {**os.environ, "PATH": f"{tool.parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    digest = hashlib.md5()
    for path in files:
        digest.update(normalized(_run([str(tool), "-elf", path.name], f"cuobjdump -elf {path.name}",
                                      cwd=path.parent, env=env)).encode())
    return digest.hexdigest()


def _objdump() -> str:
    found = shutil.which("objdump")
    if found is None:
        raise BuildError("objdump (binutils) not found on PATH: it reads a stage's host code", "")
    return found


def data_sections(obj: Path) -> dict[str, bytes]:
    """The bytes of the object's .rodata* and .data* sections, by name (a 64-bit little-endian ELF)."""
    data = obj.read_bytes()
    if data[:4] != b"\x7fELF" or data[4] != 2 or data[5] != 1:
        raise BuildError(f"{obj.name} is not a 64-bit little-endian ELF object", "")
    shoff, = struct.unpack_from("<Q", data, 0x28)
    entsize, count, names_index = struct.unpack_from("<HHH", data, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * entsize) for i in range(count)]
    names_offset = headers[names_index][4]

    def name_of(header) -> str:
        start = names_offset + header[0]
        return data[start:data.index(b"\0", start)].decode()

    return {name_of(h): data[h[4]:h[4] + h[5]] for h in headers
            if h[1] != SHT_NOBITS and name_of(h).startswith(DATA_SECTION_PREFIXES)}


def host_code_md5(obj: Path) -> str:
    """md5 of an object's host side: its disassembly with relocations, every relocation record, and
    its read-only and initialised data; the embedded device image (.nv_fatbin) is device_image_md5's."""
    objdump = _objdump()
    digest = hashlib.md5()
    for flags in (["-d", "-r", "--no-show-raw-insn"], ["-r"]):
        digest.update(normalized(_run([objdump, *flags, obj.name], f"objdump {obj.name}", cwd=obj.parent)).encode())
    for name, content in sorted(data_sections(obj).items()):
        digest.update(normalized(name).encode())
        digest.update(normalized_bytes(content))
    return digest.hexdigest()


def binding_source_md5(registry: Registry) -> str:
    """md5 of the family's binding.cpp preprocessed with its own flags (the headers it includes in
    place, torch's among them), the family folder's path made uniform."""
    from .binding import compile_flags, cxx_compiler

    text = _run([cxx_compiler(), *compile_flags(registry), "-E", "-P", str(registry.binding)],
                f"preprocessing {registry.binding}")
    return hashlib.md5(text.replace(str(registry.directory), "<family>").encode()).hexdigest()
