"""A measurement made outside `stagelab try` (an Nsight Compute comparison, a launch timeline) as
a trial run of its stage: its numbers as one entry of trial_source's schema, written beside its
output and imported (trial_import), its output files attached. The verdict is `inconclusive`: a
profile explains a timing and decides nothing by itself; its conclusion is added later with
`stagelab try-note`, as for any trial."""

from __future__ import annotations

import math
from pathlib import Path

import yaml

from ..core.errors import ConfigError
from ..core.formatting import plain


def check_hypothesis(hypothesis: str, what: str) -> str:
    if not hypothesis.strip():
        raise ConfigError(f"{what}: a recorded measurement needs --hypothesis (what it is to explain)")
    return hypothesis.strip()


def measurement_entry(stage: str, name: str, hypothesis: str, numbers: list[dict], *, commit: str, gpu: str,
                      date: str, source: str, what: str) -> dict:
    """The trial-history entry of one measurement of `stage`'s default build: no defines, verdict
    `inconclusive`; `what` names the measurement in the error a missing hypothesis raises."""
    return {"stage": stage, "date": date, "commit": commit, "gpu": gpu, "name": name, "defines": {},
            "hypothesis": check_hypothesis(hypothesis, what), "verdict": "inconclusive", "numbers": numbers,
            "source": source}


class _FixedDumper(yaml.SafeDumper):
    """Floats in fixed notation, every digit (0.00001, not 1e-05): the entry may land in docs/results."""


def _fixed_float(dumper: yaml.SafeDumper, value: float):
    if not math.isfinite(value):
        return dumper.represent_float(value)  # .nan, .inf
    text = plain(value)
    return dumper.represent_scalar("tag:yaml.org,2002:float", text if "." in text else text + ".0")


_FixedDumper.add_representer(float, _fixed_float)


def write_entry(entry: dict, path: Path) -> Path:
    path.write_text(yaml.dump([entry], Dumper=_FixedDumper, sort_keys=False, allow_unicode=True, width=120))
    return path


def record_entry(entry: dict, path: Path, attachments: list[Path], artifact_dir: str) -> str | None:
    """The entry written to `path` and imported as a trial run, `attachments` logged under
    `artifact_dir`; the run's id, or None where the store already holds this entry."""
    from . import tracking
    from .trial_import import import_entry

    run_id = import_entry(write_entry(entry, path))
    if run_id is not None:
        for attachment in attachments:
            tracking.log_artifact(run_id, attachment, artifact_dir)
    return run_id
