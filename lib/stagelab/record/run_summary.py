"""A run's answer in a few words, readable in the MLflow UI without opening its metrics.

A stage run logs hundreds of metrics (raw floats, every problem, every dtype) and a trial run the
same; a person opening either wants the outcome or verdict, why, and the few numbers that decide
it. Two forms, both written from the run's own tags and metrics, so they can be written again at
any time (a trial's conclusion comes later, an old store has none):

- TAG_SUMMARY, one line, a column of the runs tables (runs_view);
- the run's description (MLflow's `mlflow.note.content`, the top of the run's page), opened by a
  "Result" block: the outcome or verdict with the numbers, a trial's conclusion, the reason, the
  GPU, parameter file and commit, a trial's key numbers, and where the artifacts are when the store
  has none. The description the run started with (its stage's title and hypothesis) follows it.

Every number goes through core.formatting: three significant digits, fixed notation.
"""

from __future__ import annotations

from pathlib import Path
from urllib.parse import urlparse

import pandas as pd

from ..core import metrics as m
from ..core.formatting import fixed_numbers, latency, number
from . import tracking
from .runs_view import TAG_SUMMARY
from .tables import outcome_cell, short_reason

# Set on import where the store brought no artifacts (a record is its database alone): where they are.
TAG_ARTIFACTS_AT = "stagelab.artifacts_at"
SOURCE_RUN_TAG = "stagelab.imported_from_run"  # an imported run's id in the store it came from (portable)
NOTE_TAG = "mlflow.note.content"
RESULT_HEADING = "#### Result"
_AFTER_RESULT = "\n\n---\n\n"  # ends the result block; the run's own description follows
_GEOMEAN_PREFIX, _GEOMEAN_SUFFIX = "speedup_vs_", "_geomean"


def is_trial(tags: dict) -> bool:
    return tags.get(m.TAG_KIND) == m.KIND_TRIAL


def _ratio(value) -> str:
    return f"{number(value)}x"


def _libraries(values: dict) -> dict[str, float]:
    """The geometric-mean speedups over each library contender (not the parent, the best library or
    a trial's default), by contender name."""
    own = {m.PARENT, m.BEST_CONTENDER, m.TRIAL_DEFAULT_LABEL}
    found = {k.removeprefix(_GEOMEAN_PREFIX).removesuffix(_GEOMEAN_SUFFIX): v for k, v in values.items()
             if k.startswith(_GEOMEAN_PREFIX) and k.endswith(_GEOMEAN_SUFFIX) and "/" not in k}
    return {name: v for name, v in sorted(found.items()) if name not in own}


def _checks(values: dict) -> str | None:
    total = values.get(m.CHECKS_TOTAL.key())
    if total is None:
        return None
    failed = values.get(m.CHECKS_FAILED.key(), 0)
    return f"{number(total - failed)}/{number(total)} passed"


def _numbers(tags: dict, values: dict) -> dict[str, str]:
    """The run's headline numbers as (label, text), in reading order; absent ones left out."""
    out = {}
    if (p50 := values.get(m.MISSION_P50_US.key())) is not None:
        out["mission p50"] = latency(p50)
    for label, contender in ((f"vs {tags.get('parent', 'parent')}", m.PARENT),
                             ("vs default", m.TRIAL_DEFAULT_LABEL), ("vs best library", m.BEST_CONTENDER)):
        if (ratio := values.get(m.speedup_geomean(contender).key())) is not None:
            out[label] = _ratio(ratio)
    out |= {f"vs {name}": _ratio(v) for name, v in _libraries(values).items()}
    if (registers := values.get(m.MAX_REGISTERS.key())) is not None:
        out["max registers"] = number(registers)
    if spills := values.get(m.TOTAL_SPILLS.key()):
        out["spills"] = f"{number(spills)} B"
    if (checks := _checks(values)) is not None:
        out["checks"] = checks
    return out


def _verdict(tags: dict) -> tuple[str, str]:
    """(outcome or verdict, its reason as one short line)."""
    if is_trial(tags):
        return tags.get(m.TAG_VERDICT, "no verdict"), short_reason(tags.get(m.TAG_VERDICT_REASON, ""))
    shown = outcome_cell(pd.Series({f"tags.{k}": v for k, v in tags.items()}))
    if tags.get(m.TAG_OUTCOME) == m.OUTCOME_ERROR:
        return shown, ""  # outcome_cell already says whose failure and why
    return shown or "no outcome", short_reason(tags.get(m.TAG_OUTCOME_REASON, ""))


def _headline(tags: dict, values: dict) -> list[str]:
    """The outcome or verdict and the headline numbers, as the parts of a line."""
    numbers = _numbers(tags, values)
    parts = [_verdict(tags)[0], *(f"{text} {label}" if label.startswith("vs ") else f"{label} {text}"
                                  for label, text in numbers.items())]
    if not numbers and tags.get(m.TAG_KEY_NUMBERS):  # an imported trial: its log's numbers, not metrics
        parts.append(short_reason(tags[m.TAG_KEY_NUMBERS]))
    return parts


def summary_line(tags: dict, values: dict) -> str:
    """One line: outcome or verdict, the headline numbers, the reason; a trial's conclusion."""
    reason = _verdict(tags)[1]
    parts = _headline(tags, values)
    if reason:
        parts.append(reason)
    if is_trial(tags):
        parts.append(f"conclusion: {short_reason(tags.get(m.TAG_CONCLUSION, '')) or 'none yet'}")
    return " · ".join(parts)


def _where(tags: dict) -> str:
    gpu = tags.get(m.TAG_TRIAL_GPU) if is_trial(tags) else tags.get(m.TAG_GPU)
    commit = tags.get(m.TAG_TRIAL_COMMIT) or tags.get("git_commit") or "unknown"
    commit = "imported, none given" if commit == "unknown" and tags.get(m.TAG_IMPORTED_FROM) else commit[:10]
    return f"GPU `{gpu or 'none'}` · parameter file `{tags.get(m.TAG_PARAMS_FILE, '?')}` · commit `{commit}`"


def result_block(tags: dict, values: dict) -> str:
    """The description's opening block (markdown): the headline first, since the run page shows a
    description's first lines only until "Show more" is clicked."""
    verdict, *numbers = _headline(tags, values)
    lines = [f"{RESULT_HEADING}: **{verdict}**" + "".join(f" · {part}" for part in numbers), ""]
    if is_trial(tags):
        conclusion = tags.get(m.TAG_CONCLUSION) or "_none yet_ (`stagelab try note RUN_ID \"...\"` adds it)"
        lines += [f"Conclusion: {conclusion}", ""]
    if reason := _verdict(tags)[1]:
        lines += [reason, ""]
    lines += [_where(tags), ""]
    if is_trial(tags) and (key_numbers := tags.get(m.TAG_KEY_NUMBERS)):
        lines += [f"Key numbers: {fixed_numbers(key_numbers)}", ""]
    if artifacts := tags.get(TAG_ARTIFACTS_AT):
        lines += [f"Artifacts: {artifacts}", ""]
    return "\n".join(lines).rstrip()


def own_description(note: str) -> str:
    """The description the run started with: the note less a result block written before."""
    if note.startswith(RESULT_HEADING) and _AFTER_RESULT in note:
        return note.split(_AFTER_RESULT, 1)[1]
    return "" if note.startswith(RESULT_HEADING) else note


def summary_tags(tags: dict, values: dict) -> dict[str, str]:
    """TAG_SUMMARY and the description, from the run's tags and metrics."""
    own = own_description(tags.get(NOTE_TAG, ""))
    block = result_block(tags, values)
    note = block + (_AFTER_RESULT + own if own else "")
    # as set_tags stores them, so a refresh compares like with like
    return {TAG_SUMMARY: summary_line(tags, values)[:tracking.TAG_VALUE_CHARS], NOTE_TAG: note[:tracking.TAG_VALUE_CHARS]}


def has_result(tags: dict) -> bool:
    """Whether the run has decided: a stage run's outcome (not `running`), a trial's verdict."""
    if is_trial(tags):
        return bool(tags.get(m.TAG_VERDICT))
    return tags.get(m.TAG_OUTCOME) not in (None, "", m.OUTCOME_RUNNING)


def write_summary(run_id: str) -> None:
    """Write (again) the run's summary tag and description from what it holds now."""
    run = tracking.client().get_run(run_id)
    if has_result(run.data.tags):
        tracking.set_tags(run_id, summary_tags(run.data.tags, run.data.metrics))


def artifacts_elsewhere(tags: dict, origin: str) -> str:
    """Where a run's artifacts are when the store it was imported from held none (a record is the
    database alone): with the store it was recorded in, on the host that recorded it."""
    host = tags.get(m.TAG_OWNER_HOST)
    where = f"the store on {host}" if host else "the store it was recorded in"
    return (f"not in this store: {origin} held none for this run (a record is its database alone); they "
            f"stayed with {where} (`stagelab import` of that store's mlruns/ brings them)")


def _imported_without_artifacts(run, tags: dict) -> bool:
    """An imported run whose local artifact folder is missing or empty (imported from a record before
    imports said so). A tracking server's artifacts are not looked at: that costs a request per run."""
    uri = run.info.artifact_uri or ""
    if SOURCE_RUN_TAG not in tags or TAG_ARTIFACTS_AT in tags or not uri.startswith("file:"):
        return False
    folder = Path(urlparse(uri).path)
    return not folder.is_dir() or not any(folder.iterdir())


def refresh_summaries(runs: list) -> int:
    """Write the summary and description of every decided run of `runs` (mlflow Runs) whose written
    ones differ from what its tags and metrics say now: runs recorded before summaries existed, or
    since repaired, re-judged or noted. Returns how many runs were written."""
    written = 0
    for run in runs:
        stored = run.data.tags
        if not has_result(stored):
            continue
        tags = dict(stored)
        if _imported_without_artifacts(run, tags):
            tags[TAG_ARTIFACTS_AT] = artifacts_elsewhere(tags, "the store it was imported from")
        wanted = summary_tags(tags, run.data.metrics) | {k: tags[k] for k in (TAG_ARTIFACTS_AT,) if k in tags}
        if any(stored.get(k) != v for k, v in wanted.items()):
            tracking.set_tags(run.info.run_id, wanted)
            written += 1
    return written
