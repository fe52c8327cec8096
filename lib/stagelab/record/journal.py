"""A stage's journal: its trials in the order they were measured, read from the MLflow store.

`stagelab journal STAGE` prints it; `stagelab report` writes it as
docs/results/<family>/journal-<stage>.md for each stage with trials and links it from the
experiment's description. Each entry: date, commit, the trial, its hypothesis, the key numbers
with their clocks, the verdict and the conclusion. Nothing here is typed in: the journal follows
the store (imported trials keep their original date and commit, or read `imported` where their
history gave none), its words as written (but that no number or bare commit in them reads as scientific
notation), its lines wrapped at about 100 columns.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from ..core import metrics
from ..core.formatting import fixed_numbers, short_commit
from ..core.markdown_text import WIDTH, wrap_item

from . import tracking
from .run_summary import SOURCE_RUN_TAG


@dataclass(frozen=True)
class JournalEntry:
    run_id: str
    start_ms: int
    commit: str
    name: str
    hypothesis: str
    key_numbers: str
    verdict: str
    reason: str
    conclusion: str
    imported_from: str
    logged_date: str = ""                # an imported trial's date as its log gave it

    @property
    def date(self) -> str:
        if self.logged_date:
            return self.logged_date
        return datetime.fromtimestamp(self.start_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M")

    @classmethod
    def of(cls, run) -> "JournalEntry":
        tags = run.data.tags
        # a run `stagelab import` copied goes by the id it had where it ran (the id `try` printed
        # there): the copy's own id differs in every store it is imported into
        run_id = tags.get(SOURCE_RUN_TAG, run.info.run_id)
        return cls(run_id, run.info.start_time or 0, tags.get(metrics.TAG_TRIAL_COMMIT, "unknown"),
                   tags.get(metrics.TAG_TRIAL_NAME, run.info.run_name or ""), tags.get(metrics.TAG_HYPOTHESIS, ""),
                   tags.get(metrics.TAG_KEY_NUMBERS, ""), tags.get(metrics.TAG_VERDICT, "(none)"),
                   tags.get(metrics.TAG_VERDICT_REASON, ""), tags.get(metrics.TAG_CONCLUSION, ""),
                   tags.get(metrics.TAG_IMPORTED_FROM, ""), tags.get(metrics.TAG_TRIAL_DATE, ""))


def trials_filter(stage_id: str | None = None) -> str:
    """The MLflow search filter for trial runs (of one stage when given)."""
    where = f"tags.`{metrics.TAG_KIND}` = '{metrics.KIND_TRIAL}'"
    return where + (f" AND tags.`{metrics.TAG_TRIAL_OF}` = '{stage_id}'" if stage_id else "")


def journal_entries(stage_id: str, experiment: str | None = None) -> list[JournalEntry]:
    """The stage's trial runs, oldest first (ties in the order they were recorded)."""
    from ..core.family import load_family
    from ..core.registry import find_stage

    name = experiment or load_family(find_stage(stage_id)[0].family).experiment
    found = tracking.client().get_experiment_by_name(name)
    if found is None:
        return []
    runs = tracking.client().search_runs([found.experiment_id], filter_string=trials_filter(stage_id),
                                         max_results=50000)
    entries = [JournalEntry.of(run) for run in runs]
    return sorted(entries, key=lambda e: (e.start_ms, e.run_id))


def commit_label(e: "JournalEntry") -> str:
    """The commit as the header shows it: `short_commit`'s (g6123e17, never a number); `imported` for an
    entry imported from a history that did not give one (the store says `unknown`); `unknown` otherwise."""
    if e.imported_from and e.commit in ("", "unknown"):
        return "imported"
    return f"`{short_commit(e.commit)}`"


NO_CONCLUSION = '(none yet: `stagelab try note RUN_ID "..."`)'


def entry_markdown(number: int, e: JournalEntry) -> list[str]:
    """One entry: the people's words (hypothesis, conclusion) as written and the lab's (numbers, verdict),
    save that no token reads as scientific notation (`fixed_numbers`: a number an older formatter or a
    person wrote so in fixed notation, a bare short commit g-prefixed); every line wrapped at about 100
    columns."""
    lines = [f"### {number}. {e.date} · {commit_label(e)} · {e.name} · **{e.verdict}**", ""]
    lines += wrap_item("- Hypothesis: ", fixed_numbers(e.hypothesis) or "(none recorded)")
    if e.key_numbers:
        lines += wrap_item("- Numbers: ", fixed_numbers(e.key_numbers))
    if e.reason:
        lines += wrap_item("- Verdict: ", fixed_numbers(e.reason))
    lines += wrap_item("- Conclusion: ", fixed_numbers(e.conclusion) or NO_CONCLUSION)
    # a trial imported from a history file has a new run id in every store: the file names it
    lines += wrap_item("- ", f"Imported from {e.imported_from}" if e.imported_from else f"Run `{e.run_id}`")
    return lines + [""]


def journal_markdown(stage_id: str, entries: list[JournalEntry]) -> str:
    counts: dict[str, int] = {}
    for e in entries:
        counts[e.verdict] = counts.get(e.verdict, 0) + 1
    tally = ", ".join(f"{n} {verdict}" for verdict, n in sorted(counts.items())) or "none yet"
    intro = (f"{len(entries)} trials ({tally}), oldest first, from the MLflow store: `stagelab journal {stage_id}` "
             f"prints this, `stagelab try {stage_id} ...` adds to it. Dates are UTC.")
    lines = [f"# Journal of {stage_id}", "", *textwrap.wrap(intro, WIDTH, break_long_words=False,
                                                              break_on_hyphens=False), ""]
    for number, entry in enumerate(entries, 1):
        lines += entry_markdown(number, entry)
    return "\n".join(lines)


def journal_name(stage_id: str) -> str:
    return f"journal-{stage_id}.md"


def write_journals(family: str, out_dir: Path, experiment: str | None = None) -> list[Path]:
    """journal-<stage>.md for every stage of the family that has trials; returns the files written."""
    from ..core.registry import family_registry

    out_dir.mkdir(parents=True, exist_ok=True)
    written = []
    for stage_id in family_registry(family).stages:
        entries = journal_entries(stage_id, experiment)
        if entries:
            path = out_dir / journal_name(stage_id)
            path.write_text(journal_markdown(stage_id, entries))
            written.append(path)
    return written
