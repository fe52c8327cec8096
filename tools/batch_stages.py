"""The stages device_run.sh's batches name, for its prebuild: every id after `--stages` (or an
abbreviation argparse takes for it, `--stage`) in each `stagelab run` spec ("<args>;<args>..."), each
once, in order. Prints nothing when a batch names no stages (it runs every stage, so every stage is
prebuilt) or there are no batches. With `--step NAME` first, prints `yes` or nothing: whether any
batch runs that optional step (its `--steps`, else its parameter file's `steps`), so the
prebuild makes the protocol step's builds too where a batch will use them.

    BUILD_STAGES="$(python3 tools/batch_stages.py "$1")"
    [ -n "$(python3 tools/batch_stages.py --step protocol "$1")" ] && ...
"""

from __future__ import annotations

import shlex
import sys

STAGES_FLAG = "--stages"
SHORTEST_ABBREVIATION = "--stag"  # "--st" is also "--steps"
# `stagelab run` without --params runs the family's acceptance file; device_run.sh runs the sdpa family
DEFAULT_PARAMS = "params/acceptance.yaml"


def _is_stages_flag(word: str) -> bool:
    flag = word.split("=", 1)[0]
    return flag.startswith(SHORTEST_ABBREVIATION) and STAGES_FLAG.startswith(flag)


def batch_stages(batches: str) -> list[str] | None:
    """The stage ids the batches name, or None when one batch runs every stage (names none)."""
    named: dict[str, None] = {}
    specs = [spec for spec in batches.split(";") if spec.strip()]
    for spec in specs:
        words = shlex.split(spec)
        at = next((i for i, word in enumerate(words) if _is_stages_flag(word)), None)
        if at is None:
            return None
        joined = words[at].partition("=")[2]  # --stages=s1
        after = ([joined] if joined else []) + words[at + 1:]
        ids = after[:next((i for i, word in enumerate(after) if word.startswith("--")), len(after))]
        if not ids:  # `--stages` with no ids: every stage
            return None
        named.update(dict.fromkeys(ids))
    return list(named) if specs else None


def _option(words: list[str], flag: str) -> str | None:
    """The value of `flag VALUE` or `flag=VALUE` among the words (the last one, as argparse keeps)."""
    value = None
    for i, word in enumerate(words):
        if word == flag and i + 1 < len(words):
            value = words[i + 1]
        elif word.startswith(flag + "="):
            value = word.partition("=")[2]
    return value


def runs_step(batches: str, step: str) -> bool:
    """Whether any batch runs the optional step: its `--steps` list, else its parameter file's `steps`."""
    from stagelab.core.params import load_params

    for spec in (spec for spec in batches.split(";") if spec.strip()):
        words = shlex.split(spec)
        steps = _option(words, "--steps")
        if steps is not None:
            named = [s.strip() for s in steps.split(",")]
        else:
            named = list(load_params(_option(words, "--params") or DEFAULT_PARAMS).steps)
        if step in named:
            return True
    return False


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--step":
        print("yes" if runs_step(sys.argv[3] if len(sys.argv) > 3 else "", sys.argv[2]) else "")
    else:
        stages = batch_stages(sys.argv[1] if len(sys.argv) > 1 else "")
        print(" ".join(stages or []))
