"""Whether a C++ exception thrown in a torch extension reaches Python on this machine.

The device tool's machines (torch 2.11.0+cu130, g++ 13.3) kill the process instead: a TORCH_CHECK
failing in an extension built by torch's own `cpp_extension.load_inline` segfaults there, as it does in
a stage's binding (issue 44's note of 2026-11-28). Tests of a binding's own refusals (its backstop
behind the Python validation) run the call in a child process and use this to tell that machine's
limit from a bug of the binding.
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
    source = "void refuse() { TORCH_CHECK(false, \\"refused as asked\\"); }"
    module = cpp_extension.load_inline("stagelab_cpp_exception_probe", cpp_sources=[source], functions=["refuse"])
    try:
        module.refuse()
    except RuntimeError as error:
        print("raised:", error)
''')
PROBE_TIMEOUT_S = 300


@functools.lru_cache(maxsize=1)
def crash_instead_of_raise() -> str | None:
    """None where an extension's TORCH_CHECK raises RuntimeError; else why not (the probe's end)."""
    probe = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=PROBE_TIMEOUT_S)
    if probe.returncode == 0 and "raised: refused as asked" in probe.stdout:
        return None
    if probe.returncode == -signal.SIGSEGV:
        import torch

        return (f"torch {torch.__version__}: a TORCH_CHECK in an extension built by cpp_extension.load_inline "
                "segfaults instead of raising RuntimeError")
    raise RuntimeError(f"the C++ exception probe itself failed (exit {probe.returncode}): {probe.stderr[-2000:]}")


def run_in_child(code: str, timeout_s: int = 300) -> subprocess.CompletedProcess:
    """Python `code` in a child process (a crash there cannot take the test session with it)."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout_s)
