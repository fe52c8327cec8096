"""Sum up the per-block phase stamps of tools/microbench/sdpa_timeline.cu.

    python3 tools/timeline_report.py timeline.csv [--plot timeline.png] [--markdown out.md]

A persistent block also stamps its first work items one by one (clk_item<n>_<phase>): the report
then adds their steps and the boundary between one item's last P.V and the next item's first
key tile, the time a second Q buffer (s11) or PDL is meant to hide. And each consumer warpgroup
clocks the steps of its middle key tiles (tile_wg<w>_<step>, summed over the launch): the report
gives the cycles a tile spends in each (tile_table).

Within a block, phases are timed by the SM's clock64 (exact; converted to ns
by that SM's own clock rate, fitted over every record it holds); blocks and
launches are placed against each other by %globaltimer. The first and last
launch of the graph are left out of the medians (no predecessor / successor
to overlap with).
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

import pandas as pd

# Consecutive phases of one block of the key split; each step is the time from one to the next.
CONSUMER_STEPS = ["entry", "prologue", "consumer_go", "q_landed", "k_landed", "first_tile", "mainloop", "merge_ready",
                  "folded", "stored"]
PRODUCER_STEPS = ["prologue", "producer_go", "item_decoded", "q_issued", "loads_issued"]
STEP_MEANING = {
    ("entry", "prologue"): "barrier init, __syncthreads",
    ("prologue", "consumer_go"): "setmaxnreg, griddepcontrol.wait (lets the thread on early)",
    ("consumer_go", "q_landed"): "until Q landed (the rest of the previous grid, then Q's TMA)",
    ("q_landed", "k_landed"): "the first K tile after Q",
    ("k_landed", "first_tile"): "first key tile: S and its softmax",
    ("first_tile", "mainloop"): "the other key tiles and the last P.V",
    ("mainloop", "merge_ready"): "waiting for the peer warpgroup's partial",
    ("merge_ready", "folded"): "fold the peer's partial into O",
    ("folded", "stored"): "normalise, stage, store O",
    ("merge_ready", "stored"): "merge, normalise, store O",
    ("prologue", "producer_go"): "producer: griddepcontrol.wait (lets the thread on early)",
    ("producer_go", "loads_issued"): "producer: every TMA issued (ring waits included)",
    ("producer_go", "q_issued"): "producer: Q's TMA issued",
    ("producer_go", "item_decoded"): "producer: item decoded (its loads wait for the previous grid)",
    ("item_decoded", "q_issued"): "producer: Q's TMA issued",
    ("q_issued", "loads_issued"): "producer: every K/V TMA issued (ring waits included)",
}


def load(path: Path) -> pd.DataFrame:
    try:
        df = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise SystemExit(f"{path}: empty; the harness wrote no records (did it fail or hang?)") from None
    if df.empty:
        raise SystemExit(f"{path}: no block records")
    stamped = df["clk_entry"] != 0
    if not stamped.all():
        raise SystemExit(f"{path}: {int((~stamped).sum())} records without an entry stamp")
    return df


def sm_ghz(df: pd.DataFrame) -> pd.Series:
    """Clocks per ns of each SM, fitted over its records' entry stamps (clock64 is per SM)."""
    by_sm = df.groupby("smid").agg(c0=("clk_entry", "min"), c1=("clk_entry", "max"),
                                   t0=("ns_entry", "min"), t1=("ns_entry", "max"))
    span = by_sm["t1"] - by_sm["t0"]
    ghz = (by_sm["c1"] - by_sm["c0"]) / span.where(span > 0)
    return ghz.fillna(ghz.median())


def phase_ns(df: pd.DataFrame, phases: list[str]) -> pd.DataFrame:
    """Each phase as ns since the block's entry, by its SM's clock; NaN where it was not stamped
    (or where the harness that wrote the file did not know the phase)."""
    ghz = df["smid"].map(sm_ghz(df))
    out = pd.DataFrame(index=df.index)
    for phase in phases:
        clk = df.get(f"clk_{phase}", pd.Series(0, index=df.index))
        out[phase] = ((clk - df["clk_entry"]) / ghz).where(clk != 0)
    return out


def launch_table(df: pd.DataFrame, rel: pd.DataFrame) -> pd.DataFrame:
    """Per launch: first entry, last store, and the start-to-start period, in us from launch 0's start."""
    t_entry = df["ns_entry"].astype("float64")
    t_end = t_entry + rel.max(axis=1)
    origin = t_entry.min()
    table = pd.DataFrame({"start_us": (t_entry - origin) / 1e3, "end_us": (t_end - origin) / 1e3,
                          "launch": df["launch"]}).groupby("launch").agg(start_us=("start_us", "min"),
                                                                          end_us=("end_us", "max"))
    table["span_us"] = table["end_us"] - table["start_us"]
    table["period_us"] = table["start_us"].diff().shift(-1)
    table["overlap_next_us"] = table["end_us"] - table["start_us"].shift(-1)
    return table


def step_table(rel: pd.DataFrame, middle: pd.Series) -> pd.DataFrame:
    rows = []
    for steps in (CONSUMER_STEPS, PRODUCER_STEPS):
        steps = [phase for phase in steps if phase in rel and rel[phase].notna().any()]  # a config's unstamped phases drop out
        for a, b in zip(steps, steps[1:]):
            d = (rel[b] - rel[a])[middle].dropna() / 1e3
            if d.empty:
                continue
            rows.append({"from": a, "to": b, "what": STEP_MEANING.get((a, b), ""), "median_us": d.median(),
                         "p10_us": d.quantile(0.1), "p90_us": d.quantile(0.9), "blocks": len(d)})
    return pd.DataFrame(rows)


# Per work item of a persistent block (the harness's clk_item<n>_<phase> columns): its steps, and
# the boundary from one item's last P.V to the next item's first key tile.
ITEM_COLUMN = re.compile(r"clk_item(\d+)_")  # not clk_item_decoded, a phase of the block
ITEM_STEPS = {("q_landed", "first_tile"): "the item's first key tile after its Q landed",
              ("first_tile", "mainloop"): "the item's other key tiles and last P.V",
              ("mainloop", "stored"): "normalise, stage, store the item's O"}


def item_columns(df: pd.DataFrame) -> list[int]:
    """The item indices the file has stamps for (none from a harness before per-item stamps)."""
    items = sorted({int(m.group(1)) for m in map(ITEM_COLUMN.match, df.columns) if m})
    return [n for n in items if (df.get(f"clk_item{n}_first_tile", pd.Series(0, index=df.index)) != 0).any()]


def item_table(df: pd.DataFrame, middle: pd.Series) -> pd.DataFrame:
    """Median us of each item step over the middle launches' blocks and items, and of the boundary:
    item n's last P.V to item n+1's Q landed and to its first key tile (0 where a phase was not stamped)."""
    ghz = df["smid"].map(sm_ghz(df))
    items = item_columns(df)

    def us(item_a: int, a: str, item_b: int, b: str) -> pd.Series:
        """From item_a's phase a to item_b's phase b, where both were stamped."""
        ca, cb = df[f"clk_item{item_a}_{a}"], df[f"clk_item{item_b}_{b}"]
        return ((cb - ca) / ghz / 1e3).where((ca != 0) & (cb != 0))[middle].dropna()

    def joined(parts: list[pd.Series]) -> pd.Series:
        return pd.concat(parts) if parts else pd.Series(dtype=float)

    rows = []
    for (a, b), what in ITEM_STEPS.items():
        rows.append({"from": a, "to": b, "what": what, "d": joined([us(n, a, n, b) for n in items])})
    consecutive = [n for n in items if n + 1 in items]
    for b, what in (("q_landed", "boundary: last P.V to the next item's Q landed"),
                    ("first_tile", "boundary: last P.V to the next item's first key tile")):
        rows.append({"from": "mainloop", "to": f"next {b}", "what": what,
                     "d": joined([us(n, "mainloop", n + 1, b) for n in consecutive])})
    return pd.DataFrame([{"from": r["from"], "to": r["to"], "what": r["what"], "median_us": r["d"].median(),
                          "p10_us": r["d"].quantile(0.1), "p90_us": r["d"].quantile(0.9), "items": len(r["d"])}
                         for r in rows if not r["d"].empty])


# A middle key tile's steps (the harness's tile_wg<w>_<step> columns: clock64 cycles of warp 0 of
# consumer warpgroup w, summed over the launch's middle tiles; tile_wg<w>_count counts them).
TILE_STEPS = {"rescale": "O's rescale before the turn (pingpong, s16's order)",
              "k_wait": "K(idx) landed",
              "turn_wait": "this warpgroup's turn (the other's GEMM issue first)",
              "issue": "S = Q.K^T issued, V(prev) waited for, P.V issued, turn passed on",
              "s_wait": "S(idx) done on the tensor cores",
              "softmax": "the softmax (FlashAttention-4's order: with the P.V's wait and rescale)",
              "pv_wait": "P(prev).V(prev) done",
              "pack": "P packed for the next P.V"}
TILE_COLUMN = re.compile(r"tile_wg(\d+)_count$")


def tile_table(df: pd.DataFrame, middle: pd.Series) -> pd.DataFrame:
    """Cycles per middle tile of each step, per consumer warpgroup: each block's sum over its tiles
    divided by its tile count, the median over the middle launches' blocks (empty from a harness
    before tile clocks, or where no block had a middle tile)."""
    rows = []
    for wg in sorted(int(m.group(1)) for m in map(TILE_COLUMN.match, df.columns) if m):
        count = df[f"tile_wg{wg}_count"]
        has = middle & (count > 0)
        if not has.any():
            continue
        per_tile = {step: (df.loc[has, f"tile_wg{wg}_{step}"] / count[has]).median() for step in TILE_STEPS}
        total = sum(per_tile.values())
        rows += [{"warpgroup": wg, "step": step, "what": TILE_STEPS[step], "cycles": cycles,
                  "share": cycles / total if total else 0.0} for step, cycles in per_tile.items()]
        rows.append({"warpgroup": wg, "step": "tile", "what": f"one middle tile ({int(count[has].median())} a block)",
                     "cycles": total, "share": 1.0})
    return pd.DataFrame(rows)


def timeline_numbers(problem: str, lt: pd.DataFrame, items: pd.DataFrame, tiles: pd.DataFrame) -> list[dict]:
    """The report's numbers as trial-entry rows: the stamped launch period, each item step's median and
    each middle-tile step's cycles (stagelab.record.measurement_entry)."""
    rows = [{"problem": problem, "metric": "us", "quantity": "stamped build launch period median",
             "trial": round(float(lt["period_us"].median()), 3), "default": None}]
    for _, r in items.iterrows():
        rows.append({"problem": problem, "metric": "us", "quantity": f"item {r['from']} to {r['to']} median",
                     "trial": round(float(r["median_us"]), 3), "default": None})
    for _, r in tiles.iterrows():
        rows.append({"problem": problem, "metric": "clocks", "quantity": f"warpgroup {r['warpgroup']} {r['step']} a middle tile",
                     "trial": round(float(r["cycles"]), 1), "default": None})
    return rows


def record(args, numbers: list[dict], markdown: Path) -> str | None:
    """--record: the report as a trial run of args.record (its stage), the markdown attached."""
    from datetime import datetime, timezone

    from stagelab.core.envinfo import git_state
    from stagelab.record.measurement_entry import check_hypothesis, measurement_entry, record_entry

    hypothesis = (f"{check_hypothesis(args.hypothesis, 'timeline')} "
                  f"(tools/microbench/sdpa_timeline.cu, WS_TIMELINE=1, at {args.problem})")
    entry = measurement_entry(args.record, f"timeline {args.problem}", hypothesis, numbers,
                              commit=git_state()["git_commit"], gpu=args.gpu, source=str(args.csv), what="timeline",
                              date=args.date or datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M"))
    return record_entry(entry, markdown.with_suffix(".trials.yaml"), [markdown], "timeline")


def plot(df: pd.DataFrame, rel: pd.DataFrame, launches: list[int], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    origin = df.loc[df["launch"].isin(launches), "ns_entry"].min()
    colors = plt.get_cmap("tab10").colors
    fig, ax = plt.subplots(figsize=(12, 7))
    for i, (a, b) in enumerate(zip(CONSUMER_STEPS, CONSUMER_STEPS[1:])):
        sel = df["launch"].isin(launches) & rel[a].notna() & rel[b].notna()
        starts = (df.loc[sel, "ns_entry"] - origin + rel.loc[sel, a]) / 1e3
        widths = (rel.loc[sel, b] - rel.loc[sel, a]) / 1e3
        ax.barh(df.loc[sel, "smid"], widths, left=starts, height=0.8, color=colors[i % len(colors)],
                label=STEP_MEANING.get((a, b), f"{a} -> {b}"))
    ax.set_xlabel("us (globaltimer, block entries; clock64 within a block)")
    ax.set_ylabel("SM")
    ax.set_title(f"launches {launches[0]}-{launches[-1]}: one bar per block, coloured by phase")
    ax.legend(loc="upper right", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("csv", type=Path)
    parser.add_argument("--plot", type=Path, help="a Gantt chart of three middle launches (PNG)")
    parser.add_argument("--markdown", type=Path, help="write the tables here as well")
    parser.add_argument("--record", metavar="STAGE",
                        help="record the report as a trial run of STAGE (needs --markdown, --problem, --gpu, --hypothesis)")
    parser.add_argument("--problem", help="--record: the problem the harness ran, e.g. 2x10x4096x64 or 1x32x8192x128 causal")
    parser.add_argument("--gpu", help="--record: the GPU it ran on")
    parser.add_argument("--date", help="--record: when it ran (ISO, UTC; default now)")
    parser.add_argument("--hypothesis", default="", help="--record: what the timeline is to explain")
    args = parser.parse_args(argv)
    if args.record and not (args.markdown and args.problem and args.gpu and args.hypothesis.strip()):
        raise SystemExit("--record needs --markdown, --problem, --gpu and --hypothesis")
    df = load(args.csv)
    phases = list(dict.fromkeys(CONSUMER_STEPS + PRODUCER_STEPS + ["peer_mainloop"]))
    rel = phase_ns(df, phases)
    launches = sorted(df["launch"].unique())
    middle = df["launch"].isin(launches[1:-1]) if len(launches) > 2 else df["launch"].notna()
    ghz = sm_ghz(df)
    lt = launch_table(df, rel)
    st = step_table(rel, middle)
    peer = ((rel["peer_mainloop"] - rel["mainloop"])[middle].dropna() / 1e3)
    lines = [f"# Timeline of {args.csv.name}", "",
             f"{len(df)} blocks over {len(launches)} launches; SM clock {ghz.median():.3f} GHz (median over SMs)", "",
             "## Launches (us)", "", lt.to_string(float_format="{:.2f}".format), "",
             f"median period (start to start): {lt['period_us'].median():.2f} us; "
             f"median span (first entry to last store): {lt['span_us'].iloc[1:-1].median():.2f} us", "",
             "## Phases of one block (middle launches, us)", "", st.to_string(index=False, float_format="{:.2f}".format), ""]
    if not peer.empty:
        lines.append(f"peer warpgroup's mainloop ends {peer.median():+.2f} us after warpgroup 0's (median)")
    items = item_table(df, middle)
    if not items.empty:
        lines += ["", "## Work items of a persistent block (middle launches, us; the first "
                  f"{len(item_columns(df))} items of each block)", "",
                  items.to_string(index=False, float_format="{:.2f}".format)]
    tiles = tile_table(df, middle)
    if not tiles.empty:
        lines += ["", "## Middle key tiles of a consumer warpgroup (middle launches, SM cycles a tile, median over "
                  "blocks; warp 0's clock64)", "", tiles.to_string(index=False, float_format="{:.2f}".format)]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    if args.record:
        run_id = record(args, timeline_numbers(args.problem, lt, items, tiles), args.markdown)
        print(f"recorded as trial run {run_id}" if run_id else "this report is already in the store")
    if args.plot:
        mid = len(launches) // 2
        plot(df, rel, launches[max(0, mid - 1):mid + 2], args.plot)
    return 0


if __name__ == "__main__":
    sys.exit(main())
