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


def _specs(batches: str) -> list[list[str]]:
    """Each `stagelab run` spec of "<args>;<args>..." as its words."""
    return [shlex.split(spec) for spec in batches.split(";") if spec.strip()]


def _up_to_next_option(words: list[str]) -> list[str]:
    return words[:next((i for i, word in enumerate(words) if word.startswith("--")), len(words))]


def batch_stages(batches: str) -> list[str] | None:
    """The stage ids the batches name, or None when one batch runs every stage (names none)."""
    named: dict[str, None] = {}
    specs = _specs(batches)
    for words in specs:
        at = next((i for i, word in enumerate(words) if _is_stages_flag(word)), None)
        if at is None:
            return None
        joined = words[at].partition("=")[2]  # --stages=s1
        ids = _up_to_next_option(([joined] if joined else []) + words[at + 1:])
        if not ids:  # `--stages` with no ids: every stage
            return None
        named.update(dict.fromkeys(ids))
    return list(named) if specs else None


def _option(words: list[str], flag: str) -> list[str] | None:
    """The values after `flag` up to the next option (`flag=VALUE`: that one), the last occurrence as
    argparse keeps; None where the flag is not given."""
    values = None
    for i, word in enumerate(words):
        if word == flag:
            values = _up_to_next_option(words[i + 1:])
        elif word.startswith(flag + "="):
            values = [word.partition("=")[2]]
    return values


def runs_step(batches: str, step: str) -> bool:
    """Whether any batch runs the optional step: its `--steps` list, else its parameter file's `steps`."""
    from stagelab.core.params import load_params

    for words in _specs(batches):
        steps = _option(words, "--steps")  # `stagelab run --steps a b`: the names apart, none for none
        if steps is None:
            steps = list(load_params((_option(words, "--params") or [DEFAULT_PARAMS])[0]).steps)
        if step in steps:
            return True
    return False


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--step":
        print("yes" if runs_step(sys.argv[3] if len(sys.argv) > 3 else "", sys.argv[2]) else "")
    else:
        stages = batch_stages(sys.argv[1] if len(sys.argv) > 1 else "")
        print(" ".join(stages or []))
