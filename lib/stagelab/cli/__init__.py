"""The `stagelab` command line.

One module per command group (run, stages, pages, tune, tools, store), `main` in main.py; the
entry point is `stagelab.cli:main`. The commands stand above every layer and may import any.
"""

from .main import build_parser, main

__all__ = ["build_parser", "main"]
