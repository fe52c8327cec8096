"""Nsight Compute side by side: stages, variants and library contenders on ONE problem, one ncu
report each, one table. `stagelab try` says how fast; this says where the time goes (tensor pipe,
issue slots, the softmax's pipes, instructions, stalls).

    python3 tools/ncu_compare.py --problem 2x8x2048x128 s8_persistent_split \
        --variant pp=s8_persistent_split:PINGPONG=1 --contenders cudnn fa4 --out /tmp/ncu

Each subject runs in a child process of its own under `ncu --profile-from-start off`: the child
warms it up (JIT contenders compile on their first call), then one call runs between
cudaProfilerStart and cudaProfilerStop, so exactly that call's kernels are profiled. A subject
that launches several kernels (cuDNN, FA4, s9's V pre-pass) is summed: times and instructions
add, percentages are weighted by time, `kernel_us` lists each kernel's own. Where this ncu
refuses a metric, the subject is profiled again with a smaller set (METRIC_TIERS), and the table
says so.

`--record --hypothesis '...'` makes the table a trial run of the first subject's stage (every
number in a run: stagelab.record.ncu_entry), its conclusion added later with `stagelab try-note`;
`--record-table OLD/ncu_compare.md --gpu ... --date ...` records an earlier call's table.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "lib"))

from stagelab.measure import ncu, ncu_source  # noqa: E402
from stagelab.measure.launch import child_environment, find_tool, run_under_tool  # noqa: E402
from stagelab.measure.profile import summarize, total, weighted  # noqa: E402

# The problem spelling (BxHxSxD) and the contenders are the sdpa family's.
FAMILY = "sdpa"
WARMUP_CALLS = 3
CHILD_TIMEOUT_S = 600
TOP_STALLS = 4
MEGA = 1e6
MICRO = 1e-6
FALLBACK_NOTE = "metrics unknown to this ncu: profiled with a smaller set"
# L2 sectors by source and by operation, and the coalescer's two sides, as MB (rows of the table).
L2_SPLIT_ROWS = {"l2_from_sm_MB": ncu.L2_FROM_SM, "l2_from_fabric_MB": ncu.L2_FROM_FABRIC,
                 "l2_read_MB": ncu.L2_READS, "l2_write_MB": ncu.L2_WRITES,
                 "lrc_to_sms_MB": ncu.LRC_TO_SMS, "lrc_from_l2_MB": ncu.LRC_FROM_L2}
# Tried in order until ncu takes one: everything, then without the L2 and LRC split, then without the
# launch shape, then the profile step's set alone.
METRIC_TIERS = ((*ncu.metric_set(), *ncu.ISSUE_METRICS, *ncu.LAUNCH_METRICS, *L2_SPLIT_ROWS.values()),
                (*ncu.metric_set(), *ncu.ISSUE_METRICS, *ncu.LAUNCH_METRICS),
                (*ncu.metric_set(), *ncu.ISSUE_METRICS), tuple(ncu.metric_set()))
KERNEL_NAME_CHARS = 90


def parse_problem_tag(text: str, causal: bool, kv_heads: int | None = None, kv_seq_len: int | None = None,
                      layout: str | None = None) -> dict:
    """'2x8x2048x128' -> the family's problem entry {"shape": [2, 8, 2048, 128], "causal": causal}, with
    grouped-query K/V heads, a key length apart from the query length and the bshd layout where given
    (the family's parse_problem judges them)."""
    try:
        shape = [int(part) for part in text.lower().split("x")]
    except ValueError:
        raise SystemExit(f"--problem {text!r}: expected BxHxSxD, e.g. 2x8x2048x128") from None
    if len(shape) != 4 or min(shape) < 1:
        raise SystemExit(f"--problem {text!r}: expected four positive sizes BxHxSxD")
    entry = {"shape": shape, "causal": causal}
    for key, value in (("kv_heads", kv_heads), ("kv_seq_len", kv_seq_len), ("layout", layout)):
        if value is not None:
            entry[key] = value
    return entry


def child_command(argv: list[str], label: str) -> list[str]:
    return [sys.executable, str(Path(__file__).resolve()), *argv, "--child", label]


# --warm: ncu leaves the caches as the warm-up launches left them (by default it flushes them before
# the profiled launch) and the clocks unlocked (by default it locks them at base): the state a launch
# in throughput mode sees, where the inputs sit in L2.
WARM_OPTIONS = ("--cache-control", "none", "--clock-control", "none")


def ncu_command(executable: str, report_base: Path, metrics: list[str], child: list[str],
                warm: bool = False) -> list[str]:
    return [executable, "--metrics", ",".join(metrics), "--profile-from-start", "off", "--target-processes", "all",
            *(WARM_OPTIONS if warm else ()), "--force-overwrite", "--export", str(report_base), *child]


def unknown_metric(output: str) -> bool:
    """ncu's refusal of a metric name it does not have on this chip (it then profiles nothing)."""
    text = output.lower()
    return "metric" in text and ("failed to find" in text or "not found" in text or "invalid" in text)


def column(label: str, flops: float, rows: list[dict], note: str = "") -> dict:
    """One subject's column: the profile step's summary plus the issue-slot metrics and every stall."""
    if not rows:
        return {"label": label, "note": note or "no kernel profiled"}
    summary = summarize(label, flops, rows)
    duration = summary.duration_s
    stalls = {reason: weighted(rows, ncu.stall_metric(reason), duration) for reason in ncu.STALL_REASONS}
    return {
        "label": label, "note": note, "kernels": len(rows), "time_us": duration / MICRO,
        "kernel_us": "/".join(_cell(r.get(ncu.DURATION, math.nan) / MICRO) for r in rows), "tflops": summary.tflops,
        "tensor_pct": summary.tensor_util_pct, "issue_pct": weighted(rows, ncu.ISSUE_ACTIVE, duration),
        "xu_pct": weighted(rows, ncu.PIPE_XU, duration), "fma_pct": weighted(rows, ncu.PIPE_FMA, duration),
        "alu_pct": weighted(rows, ncu.PIPE_ALU, duration),
        "warp_inst_M": total(rows, ncu.WARP_INSTRUCTIONS) / MEGA, "registers": summary.registers,
        "l2_MB": summary.l2_bytes / MEGA, "l2_pct": summary.l2_pct, "l2_hit_pct": summary.l2_hit_pct,
        **{row: total(rows, metric) * ncu.L2_SECTOR_BYTES / MEGA for row, metric in L2_SPLIT_ROWS.items()},
        "dram_MB": summary.dram_bytes / MEGA, "grid": _launch(rows, ncu.GRID_SIZE),
        "block": _launch(rows, ncu.BLOCK_SIZE), "cluster": _launch(rows, ncu.CLUSTER_SIZE),
        "names": [str(r[ncu.KERNEL_COLUMN])[:KERNEL_NAME_CHARS] for r in rows], "stalls": stalls,
    }


def _launch(rows: list[dict], metric: str) -> str:
    """A launch dimension per kernel, '/'-joined (one value for the usual single kernel)."""
    return "/".join(_cell(r.get(metric, math.nan)) for r in rows)


ROWS = ("kernels", "grid", "block", "cluster", "time_us", "kernel_us", "tflops", "tensor_pct", "issue_pct", "xu_pct", "fma_pct",
        "alu_pct", "warp_inst_M", "registers", "l2_MB", *L2_SPLIT_ROWS, "l2_pct", "l2_hit_pct", "dram_MB")


def _cell(value) -> str:
    if isinstance(value, float):
        return "n/a" if math.isnan(value) else f"{value:.4g}"
    return str(value)


def top_stalls(columns: list[dict]) -> list[str]:
    """Every subject's TOP_STALLS largest stall reasons, in order of first appearance; a reason the
    page lacks (NaN) is no candidate (NaN in the sort key left real reasons out)."""
    top = []
    for col in columns:
        measured = {reason: value for reason, value in col.get("stalls", {}).items() if not math.isnan(value)}
        for reason, _ in sorted(measured.items(), key=lambda item: -item[1])[:TOP_STALLS]:
            if reason not in top:
                top.append(reason)
    return top


def stall_rows(columns: list[dict]) -> list[str]:
    return [f"stall {reason}" for reason in top_stalls(columns)]


def table(columns: list[dict]) -> str:
    """Markdown: one row per metric, one column per subject; the stall rows are every subject's
    top reasons (warps stalled per issued instruction)."""
    top = top_stalls(columns)
    lines = ["| metric | " + " | ".join(col["label"] for col in columns) + " |",
             "|---|" + "---|" * len(columns)]
    for row in ROWS:
        lines.append(f"| {row} | " + " | ".join(_cell(col.get(row, "–")) for col in columns) + " |")
    for reason in top:
        lines.append(f"| stall {reason} | " + " | ".join(_cell(col.get("stalls", {}).get(reason, "–"))
                                                       for col in columns) + " |")
    notes = [f"{col['label']}: {col['note']}" for col in columns if col.get("note")]
    names = [f"{col['label']} ran: {', '.join(col['names'])}" for col in columns if col.get("names")]
    return "\n".join(lines + [""] + notes + names)


def parse_variant(spec: str):
    """LABEL=STAGE:KEY=VAL,KEY=VAL -> (LABEL, (registry, the stage built with those defines))."""
    from stagelab.core.registry import find_stage
    from stagelab.core.trial_spec import parse_defines

    label, _, rest = spec.partition("=")
    stage_id, _, defines = rest.partition(":")
    reg, stage = find_stage(stage_id)
    return label, (reg, stage.with_defines(parse_defines([d for d in defines.split(",") if d])))


def load_kernel(family, build):
    """The family's kernel of a (registry, stage) pair, loaded from the build cache."""
    from stagelab.core.build import build_stage

    reg, stage = build
    return family.stage_kernel(build_stage(stage, reg).module, stage.id, stage.input_kind)


def prebuild(builds, jobs: int) -> None:
    """Every subject compiled side by side into the build cache; the child processes load them."""
    from stagelab.core.build import build_all
    from stagelab.core.errors import BuildError

    for _, outcome in build_all([(stage, reg) for reg, stage in builds], jobs):
        if isinstance(outcome, BuildError):
            raise outcome


def subjects(args) -> dict:
    """label -> ("stage", (registry, stage)) or ("contender", name), in the order given."""
    from stagelab.core.registry import find_stage

    found = {stage_id: ("stage", find_stage(stage_id)) for stage_id in args.stages}
    for spec in args.variant:
        label, build = parse_variant(spec)
        found[label] = ("stage", build)
    found.update({name: ("contender", name) for name in args.contenders})
    return found


def run_child(args, label: str) -> int:
    """Warm the subject up, then profile exactly one call of it."""
    import torch

    from stagelab.explore import stage_call
    from stagelab.core.family import load_family

    kind, what = subjects(args)[label]
    family = load_family(FAMILY)
    problem = family.parse_problem("ncu_compare", problem_entry_of(args))[0]
    inputs = family.make_inputs(problem, family.torch_dtype(args.dtype), seed=0, device="cuda")
    if kind == "stage":
        call = stage_call(family, load_kernel(family, what), problem, inputs)
    else:
        call = family.contender(what, problem, inputs)
    for _ in range(WARMUP_CALLS):
        call()
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    call()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    return 0


def profile_subject(executable: str, argv: list[str], label: str, out: Path, flops: float,
                    warm: bool = False) -> dict:
    """ncu on one subject's child; the issue-slot metrics first, the profile step's set if refused."""
    base = out / label
    note = ""
    for metrics in METRIC_TIERS:
        code, output = run_under_tool(ncu_command(executable, base, list(metrics), child_command(argv, label), warm),
                                      CHILD_TIMEOUT_S, child_environment())
        (out / f"{label}.log").write_text(output)
        if code == 0 or not unknown_metric(output):
            break
        note = FALLBACK_NOTE
    if code != 0:
        return {"label": label, "note": f"ncu exit {code} (see {label}.log)"}
    report = base.with_name(base.name + ncu.REPORT_SUFFIX)
    _, text = run_under_tool(ncu.csv_command(executable, str(report)), CHILD_TIMEOUT_S, child_environment())
    return column(label, flops, ncu.parse_raw_csv(text), note)


def profile_source(executable: str, argv: list[str], label: str, out: Path) -> str:
    """--source: sample the subject's program counters; the page's CSV and its summary land beside
    the report (<label>.source.csv, <label>.source.md)."""
    base = out / f"{label}.source"
    code, output = run_under_tool(ncu_source.source_command(executable, str(base), child_command(argv, label)),
                                  CHILD_TIMEOUT_S, child_environment())
    (out / f"{label}.source.log").write_text(output)
    if code != 0:
        return f"### {label}\n\nncu exit {code} while sampling (see {label}.source.log)\n"
    _, text = run_under_tool(ncu_source.page_command(executable, str(base) + ncu.REPORT_SUFFIX), CHILD_TIMEOUT_S,
                             child_environment())
    (out / f"{label}.source.csv").write_text(text)
    summary = ncu_source.summary_markdown(label, ncu_source.parse_source_page(text))
    (out / f"{label}.source.md").write_text(summary)
    return summary


def problem_entry_of(args) -> dict:
    return parse_problem_tag(args.problem, args.causal, args.kv_heads, args.kv_seq_len, args.layout)


def parse_args(argv: list[str]) -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stages", nargs="*")
    ap.add_argument("--problem", required=True, help="BxHxSxD, e.g. 2x8x2048x128")
    ap.add_argument("--causal", action="store_true")
    ap.add_argument("--kv-heads", type=int, help="grouped-query attention: K/V heads (dividing H)")
    ap.add_argument("--kv-seq-len", type=int, help="keys, where they differ from the queries (S)")
    ap.add_argument("--layout", choices=["bhsd", "bshd"], help="the family's input layout (default bhsd)")
    ap.add_argument("--dtype", default="float16")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=STAGE:KEY=VAL,KEY=VAL")
    ap.add_argument("--contenders", nargs="*", default=["cudnn", "fa4"])
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "build/ncu_compare")))
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--source", action="store_true",
                    help="also sample each subject's program counters: where in the SASS its warps stall")
    ap.add_argument("--warm", action="store_true",
                    help="keep L2 warm and the clocks unlocked (throughput mode's state), not ncu's flush and base clocks")
    ap.add_argument("--hypothesis", default="",
                    help="what the comparison is to explain; with --record, the run's hypothesis")
    ap.add_argument("--record", action="store_true",
                    help="record the table as a trial run of the first subject's stage (MLflow, $MLFLOW_TRACKING_URI)")
    ap.add_argument("--record-table", type=Path, metavar="NCU_COMPARE.md",
                    help="record an earlier call's table (the same subjects and problem) instead of profiling; "
                         "with --gpu and --date, and the commit in $STAGELAB_GIT_COMMIT")
    ap.add_argument("--gpu", help="--record-table: the GPU the table was measured on")
    ap.add_argument("--date", help="--record-table: when it was measured (ISO, UTC)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    args = parse_args(argv)
    problem_entry = problem_entry_of(args)  # a bad --problem stops here, before any build
    if args.record and not args.hypothesis.strip():
        raise SystemExit("--record needs --hypothesis: what the comparison is to explain")
    if args.child:
        return run_child(args, args.child)
    if args.record_table:
        return record_table(args)
    executable = find_tool(ncu.NCU)
    if executable is None:
        raise SystemExit("ncu is neither on PATH nor in the CUDA toolkit")
    from stagelab.core.family import load_family

    found = subjects(args)
    prebuild([what for kind, what in found.values() if kind == "stage"], args.jobs)
    family = load_family(FAMILY)
    flops = family.parse_problem("ncu_compare", problem_entry)[0].flops()
    args.out.mkdir(parents=True, exist_ok=True)
    columns, sources = [], []
    for label in found:
        print(f"[ncu] {label}", flush=True)
        columns.append(profile_subject(executable, argv, label, args.out, flops, args.warm))
        if args.source:
            sources.append(profile_source(executable, argv, label, args.out))
    state = " (warm L2, clocks unlocked)" if args.warm else ""
    text = f"{problem_label(args)} {args.dtype}{state}\n\n{table(columns)}\n"
    if sources:
        text += "\n## Where the warps wait (sampled program counters)\n\n" + "\n".join(sources)
    (args.out / "ncu_compare.md").write_text(text)
    print(text, flush=True)
    if args.record:
        from stagelab.core.envinfo import git_state
        import torch

        when = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M")
        record(args, columns, [*ROWS, *stall_rows(columns)], args.out / "ncu_compare.md",
               git_state()["git_commit"], torch.cuda.get_device_name(0), when)
    return 0


def problem_label(args) -> str:
    """The problem as the table's first line names it: 2x10x4096x64 layout=bshd, 2x8x2048x128 causal."""
    extras = "".join(f" {key}={value}" for key, value in problem_entry_of(args).items()
                     if key not in ("shape", "causal"))
    return f"{args.problem}{' causal' if args.causal else ''}{extras}"


def comparison_state(args) -> str:
    """The profiled launch's state, in words an MLflow key keeps (no quotes, commas or brackets)."""
    return "warm L2 and unlocked clocks" if args.warm else "locked clocks"


def record(args, columns: list[dict], rows: list[str], table_path: Path, commit: str, gpu: str, when: str) -> str:
    """The comparison as a trial run of the first subject's stage (stagelab.record.ncu_entry)."""
    from stagelab.record.ncu_entry import comparison_entry, record_comparison

    kind, what = next(iter(subjects(args).values()))
    if kind != "stage":
        raise SystemExit("--record: the first subject must be a stage or a --variant (the run is that stage's trial)")
    entry = comparison_entry(what[1].id, f"{problem_label(args)} {args.dtype}".replace("=", " "), columns, rows,
                             hypothesis=args.hypothesis, state=comparison_state(args), commit=commit, gpu=gpu,
                             date=when, source=str(table_path))
    run_id = record_comparison(entry, table_path.parent, table_path)
    print(f"[ncu] recorded as trial run {run_id}" if run_id else "[ncu] this table is already in the store",
          flush=True)
    return run_id


def record_table(args) -> int:
    """--record-table: an earlier call's table recorded as `--record` would have recorded it."""
    from stagelab.core.envinfo import git_state
    from stagelab.core.errors import ConfigError
    from stagelab.record.ncu_entry import columns_from_table

    if not (args.gpu and args.date and args.hypothesis.strip()):
        raise SystemExit("--record-table needs --gpu, --date and --hypothesis")
    try:
        text = args.record_table.read_text()
        columns, rows = columns_from_table(text)
    except (OSError, ConfigError) as exc:
        raise SystemExit(f"--record-table {args.record_table}: {exc}") from None
    measured, named = text.splitlines()[0], f"{problem_label(args)} {args.dtype}"
    if not measured.startswith(named):
        raise SystemExit(f"--record-table {args.record_table}: it measured {measured!r}, not {named}")
    labels, subject_labels = [col["label"] for col in columns], list(subjects(args))
    if labels != subject_labels:
        raise SystemExit(f"--record-table {args.record_table}: its subjects {labels} are not the ones named "
                         f"{subject_labels}")
    record(args, columns, rows, args.record_table, git_state()["git_commit"], args.gpu, args.date)
    return 0


if __name__ == "__main__":
    sys.exit(main())
