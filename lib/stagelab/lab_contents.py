"""JupyterLab on the stage notebooks (`stagelab lab`, `make lab`): they open clean and save as committed.

A committed stage notebook names the project's kernelspec and only its language's name: the
language_info a kernel reports carries its Python version, which differs between machines.
JupyterLab writes the running kernel's kernelspec and language_info into an opened notebook and
marks it modified wherever they differ from the file's (a notebook opened and left alone then asked
to be saved). The lab server here gets a contents manager that fills them on reading with what the
project's kernel will report (the server's own Python: the kernelspec is installed into this
environment) and trims them back on writing, so a notebook saved without edits is the committed file.
"""

from __future__ import annotations

import copy
import os
import sys
from pathlib import Path

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager

from .notebooks import NOTEBOOK_METADATA

PROJECT_KERNELSPEC = NOTEBOOK_METADATA["kernelspec"]
COMMITTED_LANGUAGE_INFO = NOTEBOOK_METADATA["language_info"]


def kernel_language_info() -> dict:
    """What ipykernel in this Python reports as language_info (the version included)."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


def _is_stage_notebook(model: dict) -> bool:
    """A notebook read or written with its content, on the project's kernelspec."""
    if model.get("type") != "notebook" or model.get("content") is None:
        return False
    return model["content"].get("metadata", {}).get("kernelspec", {}).get("name") == PROJECT_KERNELSPEC["name"]


class StageNotebookContents(AsyncLargeFileManager):
    """Jupyter server's file contents, with the stage notebooks' kernel metadata filled on reading and
    trimmed on writing; every other file as the default manager keeps it."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        if _is_stage_notebook(model):
            model["content"]["metadata"]["language_info"] = kernel_language_info()
        return model

    async def save(self, model, path=""):
        if _is_stage_notebook(model):  # the caller's model left as it was: a copy goes to the file
            content = copy.copy(model["content"])
            content["metadata"] = {**content["metadata"], "language_info": dict(COMMITTED_LANGUAGE_INFO)}
            model = {**model, "content": content}
        return await super().save(model, path)


def install_kernelspec() -> str:
    """The project's kernelspec in this environment (sys.prefix), running this Python; its folder."""
    from ipykernel.kernelspec import install

    return install(kernel_name=PROJECT_KERNELSPEC["name"], display_name=PROJECT_KERNELSPEC["display_name"],
                   prefix=sys.prefix)


def lab_command(notebook_dir: Path, *, port: int | None = None, open_browser: bool = True) -> list[str]:
    """JupyterLab on notebook_dir with StageNotebookContents (root may run it: containers do)."""
    command = [sys.executable, "-m", "jupyterlab", f"--ServerApp.root_dir={notebook_dir}",
               f"--ServerApp.contents_manager_class={__name__}.{StageNotebookContents.__name__}"]
    if port is not None:
        command.append(f"--port={port}")
    if not open_browser:
        command.append("--no-browser")
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        command.append("--allow-root")
    return command
