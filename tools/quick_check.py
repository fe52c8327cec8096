"""The kernel edit loop's old command line, now a thin wrapper over `stagelab try` (stagelab.run.trial):
the same checks and timing, the same parameter file (params/try.yaml: ragged check problems, a
few timed shapes, throughput mode), nothing recorded unless --record. Prefer `stagelab try`.

    python3 tools/quick_check.py s5_wgmma s6_tma_warpspec [--time] [--contenders cudnn flash]
    python3 tools/quick_check.py s9_fp8 --time --variant pp=s9_fp8:PINGPONG=1 --debug

Each stage is checked (the lab's checks: the family's budget on every problem, dtype and seed, and
the dependent-launch chains) and, with --time, timed beside its default and the library
contenders; a --variant LABEL=STAGE:KEY=VAL,... is a trial of STAGE with those defines. Stages are
timed each against its own default: for two stages in one table, `stagelab run` them.
"""

from __future__ import annotations

import argparse
import os
import sys

from stagelab.cli.trial import print_session
from stagelab.run.trial import Narrowing, run_trials
from stagelab.core.trial_spec import TrialSpec, parse_defines


def report_debug(results) -> None:
    """The worst seed per (problem, dtype): error, budget, the low-precision yardstick's error."""
    worst = {}
    for r in results:
        key = (r.shape, r.dtype)
        if key not in worst or r.err_budget_ratio > worst[key].err_budget_ratio:
            worst[key] = r
    for r in worst.values():
        extra = f" vs_fp16 {r.err_vs_fp16:.2e}" if hasattr(r, "err_vs_fp16") else ""
        print(f"  {'ok' if r.passed else 'FAIL'} {r.shape} {r.dtype}: err {r.max_abs_err:.2e} budget {r.budget:.2e} "
              f"lowprec {r.lowprec_err:.2e} ratio {r.err_budget_ratio:.3f}{extra}", flush=True)


def parse_variant(spec: str) -> tuple[str, TrialSpec]:
    """LABEL=STAGE:KEY=VAL,KEY=VAL -> (STAGE, the trial of those defines named LABEL)."""
    label, _, rest = spec.partition("=")
    stage_id, _, defines = rest.partition(":")
    if not label or not stage_id:
        raise SystemExit(f"--variant {spec!r}: expected LABEL=STAGE:KEY=VAL,KEY=VAL")
    return stage_id, TrialSpec.of(defines=parse_defines([d for d in defines.split(",") if d]), name=label)


def trials_by_stage(stages: list[str], variants: list[str]) -> dict[str, list[TrialSpec]]:
    """Each named stage as a trial of itself (no change), and each variant under its stage."""
    by_stage: dict[str, list[TrialSpec]] = {stage: [TrialSpec(stage)] for stage in stages}
    for spec in variants:
        stage, trial = parse_variant(spec)
        by_stage.setdefault(stage, []).append(trial)
    return by_stage


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("stages", nargs="*")
    ap.add_argument("--time", action="store_true")
    ap.add_argument("--contenders", nargs="*", default=None, help="library contenders (default: the try file's)")
    ap.add_argument("--repetitions", type=int, default=None)
    ap.add_argument("--only", nargs="*", default=[], metavar="TAG",
                    help="time only these problems of the timing list (e.g. 2x8x512x64 2x8x2048x128_causal)")
    ap.add_argument("--debug", action="store_true", help="print every check's error and budget")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="parallel builds")
    ap.add_argument("--variant", action="append", default=[], metavar="LABEL=STAGE:KEY=VAL,KEY=VAL",
                    help="also check and time STAGE built with these defines, under LABEL")
    ap.add_argument("--record", action="store_true", help="record each as a trial run (as `stagelab try` does)")
    args = ap.parse_args(argv)
    ok = True
    for stage, specs in trials_by_stage(args.stages, args.variant).items():
        narrowing = Narrowing(tuple(args.contenders) if args.contenders is not None else None, args.repetitions,
                              tuple(args.only), check_only=not args.time)
        session = run_trials(stage, specs, jobs=args.jobs, track=args.record, narrowing=narrowing)
        if args.debug:
            for trial in session.trials:
                if trial.measured.checks:
                    print(f"[debug] {trial.spec.name}")
                    report_debug(trial.measured.checks.results)
        ok &= print_session(session)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
