"""The answer at a glance: which stage is fastest on each problem of a parameter file, and by how much.

A results page opens with it. Only a stage's latest run of its current source (source_state; or of
an older source `stagelab same-code` showed compiles to the same code) that passed its checks
(outcome pass or valid_negative) can be best: a stale run measured code that is gone, and a fast
wrong kernel is a failure. The ratios against the libraries are the best run's own (timed side by
side with it); the ratio against the previous best, the fastest stage before it in the ladder,
compares two runs' p50s.
"""

from __future__ import annotations

import pandas as pd

from ..core import metrics as m
from ..core.family import Family
from ..core.formatting import markdown
from ..core.registry import family_registry
from .source_state import SOURCE_COLUMN, is_current
from .tables import stage_order

# Outcomes of a run correct on every check and within its gates: the candidates for best.
CORRECT_OUTCOMES = ("pass", "valid_negative")
PARENT_COLUMN = f"vs {m.PARENT}"
EIGHT_BIT_ONLY = "best 8-bit stage (no 16-bit stage current)"


def candidates(runs: pd.DataFrame) -> set[str]:
    """The stages whose run (one parameter file's, from latest_runs) can be best."""
    current = runs.get(SOURCE_COLUMN, pd.Series(None, index=runs.index)).map(is_current)
    return set(runs.loc[current & runs[f"tags.{m.TAG_OUTCOME}"].isin(CORRECT_OUTCOMES), f"tags.{m.TAG_STAGE}"])


def _problems(shapes: pd.DataFrame, order: list[str]) -> list[str]:
    """The timed problems in the parameter file's order, then any the file no longer names."""
    timed = list(dict.fromkeys(shapes["shape"]))
    return [p for p in order if p in timed] + sorted(p for p in timed if p not in order)


def best_stage_table(shapes: pd.DataFrame, runs: pd.DataFrame, family: Family, problems: list[str] = ()) -> pd.DataFrame:
    """One row per problem: the candidate stage with the lowest p50 there, its p50 and throughput,
    its ratio to each library contender it was timed beside, and the previous best.

    `shapes`: tables.per_shape_table of one parameter file; `runs`: that file's runs from
    latest_runs; `problems`: the file's problem tags in its order."""
    p50 = next((c for c in shapes.columns if c.startswith("p50 (")), None)
    if p50 is None:
        return pd.DataFrame()
    ladder = stage_order(family)
    chosen = shapes[shapes["stage"].isin(candidates(runs))].dropna(subset=[p50])
    # a stage that takes 8-bit inputs (stages.yaml `inputs:`) answers another question: ranked apart
    low_precision = chosen["stage"].isin(reduced_precision_stages(family))
    eight_bit, chosen = chosen[low_precision], chosen[~low_precision]
    libraries = [c for c in shapes.columns if c.startswith("vs ") and c != PARENT_COLUMN]
    rates = [c for c in shapes.columns if c.startswith(family.throughput_unit)]  # absent where none was logged
    shown = [p50, *rates, *libraries]
    if chosen.empty:  # no 16-bit stage is current here: the 8-bit stages still answer for themselves
        return _eight_bit_only(eight_bit, list(problems), p50, shown)
    rows = []
    for problem in _problems(chosen, list(problems)):
        timed = chosen[chosen["shape"] == problem]
        best = timed.loc[timed[p50].idxmin()]
        row = {"problem": problem, "best stage": best["stage"], **{c: best[c] for c in shown}}
        earlier = timed[timed["stage"].map(ladder) < ladder[best["stage"]]]
        if not earlier.empty:
            previous = earlier.loc[earlier[p50].idxmin()]
            row.update({"previous best": previous["stage"], "vs previous best": previous[p50] / best[p50]})
        row.update(_best_eight_bit(eight_bit[eight_bit["shape"] == problem], p50, best[p50]))
        rows.append(row)
    return pd.DataFrame(rows).dropna(axis=1, how="all")


def _eight_bit_only(eight_bit: pd.DataFrame, problems: list[str], p50: str, shown: list[str]) -> pd.DataFrame:
    """The fastest 8-bit stage per problem with its own numbers, where no 16-bit stage can be best."""
    rows = []
    for problem in _problems(eight_bit, problems):
        timed = eight_bit[eight_bit["shape"] == problem]
        fastest = timed.loc[timed[p50].idxmin()]
        rows.append({"problem": problem, EIGHT_BIT_ONLY: fastest["stage"], **{c: fastest[c] for c in shown}})
    return pd.DataFrame(rows).dropna(axis=1, how="all")


def reduced_precision_stages(family: Family) -> set[str]:
    """The stages whose inputs are not the family's full-precision ones (sdpa's s9_fp8: e4m3)."""
    return {sid for sid, stage in family_registry(family.name).stages.items() if stage.input_kind}


def _best_eight_bit(timed: pd.DataFrame, p50: str, best_p50: float) -> dict:
    """The fastest 8-bit stage on one problem and the best full-precision stage's p50 over its."""
    if timed.empty:
        return {}
    fastest = timed.loc[timed[p50].idxmin()]
    return {"best 8-bit stage": fastest["stage"], "8-bit vs best": best_p50 / fastest[p50]}


def best_heading(name: str) -> str:
    """Not `### <name>`: its anchor would take the file's own section's (`## <name>`)."""
    return f"### Best stage on {name}"


def best_stage_lines(name: str, table: pd.DataFrame, runs: pd.DataFrame) -> list[str]:
    """One parameter file's part of the section: its table, or why it has none."""
    lines = [best_heading(name), ""]
    stale = int((~runs.get(SOURCE_COLUMN, pd.Series(None, index=runs.index)).map(is_current)).sum())
    if table.empty:
        return lines + [f"_no stage has a run of its current source that passed its checks on this GPU "
                        f"({len(runs)} stage runs, {stale} of them stale): see the tables below_", ""]
    if EIGHT_BIT_ONLY in table.columns:
        lines += [f"_no 16-bit stage has a run of its current source that passed its checks on this GPU "
                  f"({len(runs)} stage runs, {stale} of them stale): the best 8-bit stage per problem, with its "
                  "own p50 and the libraries' p50 over it_", ""]
    return lines + [markdown(table), ""]  # the p50 column names the file's primary timing mode


def section_intro(gpu: str) -> list[str]:
    """The section's heading and how to read its tables (lines of a paragraph, kept short)."""
    return [
        "## Best stage per problem", "",
        f"On `{gpu}`, per parameter file: the fastest stage on each problem, among each stage's latest run",
        "of its current source that passed its checks (outcome pass or valid_negative); a stale run, marked",
        "in the tables below, is never picked; a run of an older source whose code `stagelab same-code` found",
        "unchanged counts as current, marked \"same SASS as\" its commit (not re-run).",
        "\"vs <library>\": the library's p50 over the best stage's, timed side by side in the same run (>1:",
        "the stage is faster; – : not timed there).",
        "\"vs previous best\": the p50 of the fastest stage before it in the ladder (named) over the best",
        "stage's, each from its own run. A stage on 8-bit inputs is ranked apart: \"best 8-bit stage\", and",
        "\"8-bit vs best\", the best stage's p50 over its.", "",
    ]
