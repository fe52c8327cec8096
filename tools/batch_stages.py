"""The stages device_run.sh's batches name, for its prebuild: every id after `--stages` (or an
abbreviation argparse takes for it, `--stage`) in each `stagelab run` spec ("<args>;<args>..."), each
once, in order. Prints nothing when a batch names no stages (it runs every stage, so every stage is
prebuilt) or there are no batches.

    BUILD_STAGES="$(python3 tools/batch_stages.py "$1")"
"""

from __future__ import annotations

import shlex
import sys

STAGES_FLAG = "--stages"
SHORTEST_ABBREVIATION = "--stag"  # "--st" is also "--steps"


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


if __name__ == "__main__":
    stages = batch_stages(sys.argv[1] if len(sys.argv) > 1 else "")
    print(" ".join(stages or []))
