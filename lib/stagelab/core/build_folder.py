"""A build's folder, build/<stage>/<key>/, as every backend writes it: filled privately, then
published in one rename, so a reader never sees half a build and two processes building the same
key at once leave one whole folder."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")


def publish_build(folder: Path, key: str, write: Callable[[Path], T]) -> T:
    """write(workdir) into a new private folder beside `folder`, which then becomes `folder`; when
    another process published it first, theirs stays. What write returns comes back."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix=f".{key}.", dir=folder.parent))
    try:
        written = write(workdir)
        try:
            workdir.rename(folder)
        except OSError:  # another process finished the same build first: keep theirs
            shutil.rmtree(workdir, ignore_errors=True)
    except BaseException:
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    return written
