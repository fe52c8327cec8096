"""Whether a C++ exception thrown in a torch extension reaches Python on this machine.

On the device tool's machines (torch 2.11.0+cu130, g++ 13.3) a stage binding's TORCH_CHECK with a
formatted message (`TORCH_CHECK(ok, "got ", t.sizes())`: the message built as a std::string) kills the
process with a segfault, while its checks with a plain literal message raise RuntimeError as they should
(2026-11-28, twenty-ninth session: three calls of one binding function in child processes). The probe
therefore throws a formatted message from an extension built by torch's own `cpp_extension.load_inline`:
if that dies too, the machine's torch cannot raise such a message from any extension; if it raises, a
crash of the binding is the binding's own (its build, lib/stagelab/core/binding.py). Tests of a
binding's refusals (its backstop behind the Python validation) run the call in a child process and use
this to tell the two apart.
"""

from __future__ import annotations

import functools
import signal
import subprocess
import sys
import textwrap

PROBE = textwrap.dedent('''
    import torch
    from torch.utils import cpp_extension
    source = "void refuse(int64_t times) { TORCH_CHECK(false, \\"refused \\", times, \\" times\\"); }"
    module = cpp_extension.load_inline("stagelab_cpp_exception_probe", cpp_sources=[source], functions=["refuse"])
    try:
        module.refuse(2)
    except RuntimeError as error:
        print("raised:", error)
''')
PROBE_TIMEOUT_S = 300


@functools.lru_cache(maxsize=1)
def crash_instead_of_raise() -> str | None:
    """None where an extension's TORCH_CHECK raises RuntimeError; else why not (the probe's end)."""
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    if probe.returncode == 0 and "raised: refused 2 times" in probe.stdout:
        return None
    if probe.returncode == -signal.SIGSEGV:
        import torch

        return (f"torch {torch.__version__}: a TORCH_CHECK with a formatted message in an extension built by "
                "cpp_extension.load_inline segfaults instead of raising RuntimeError")
    raise RuntimeError(f"the C++ exception probe itself failed (exit {probe.returncode}): {probe.stderr[-2000:]}")


def run_in_child(code: str, timeout_s: int = 300) -> subprocess.CompletedProcess:
    """Python `code` in a child process (a crash there cannot take the test session with it)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
