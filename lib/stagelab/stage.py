"""One stage, one parameter file, one MLflow run: the flow every stage notebook follows.

    run = StageRun("s0_baseline", "params/acceptance.yaml")
    run.build()        # nvcc + cpp_extension, cached; a failure is logged as build_failed
    run.resources()    # ptxas report per kernel and arch, registry gates
    run.check()        # float64 reference, FA3 budget, poisoned outputs, >= 2 seeds
    run.time()         # stage vs parent vs SDPA backends, same inputs, same process
    run.finish()       # outcome, metrics, tags, artifacts; ends the MLflow run
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import pandas as pd
import torch

from . import tracking
from .build import BuildResult, build_stage
from .checks import TORCH_DTYPES, CheckResult, check_all, make_inputs
from .envinfo import git_state, gpu_info, read_clocks, software_versions
from .errors import BuildError
from .outcome import Evidence, Outcome, decide, geometric_mean
from .params import RunParams, Shape, load_params
from .paths import repo_root
from .registry import Registry, Stage, load_registry
from .resources import GateResult, evaluate_gates, gates_passed
from .sdpa import StageKernel, default_scale
from .timing import L2Flusher, TimingStats, sdpa_contender, time_contenders


def _progress(iterable=None, *, desc: str, total: int | None = None):
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=desc, total=total, leave=False)


def resolve_params_path(params: str | Path) -> Path:
    path = Path(params)
    if not path.is_absolute() and not path.exists():
        path = repo_root() / path
    return path


class StageRun:
    def __init__(self, stage: str, params: str | Path = "params/acceptance.yaml", *,
                 defines: dict | None = None, mlflow_run_id: str | None = None,
                 experiment: str = tracking.DEFAULT_EXPERIMENT, registry: Registry | None = None,
                 track: bool = True):
        self.registry = registry or load_registry()
        self.stage: Stage = self.registry.get(stage).with_defines(defines)
        self.parent: Stage | None = self.registry.get(self.stage.parent) if self.stage.parent else None
        self.params: RunParams = load_params(resolve_params_path(params))
        self.gpu_available = torch.cuda.is_available()
        self.device = torch.device("cuda") if self.gpu_available else torch.device("cpu")
        self.artifacts = Path(tempfile.mkdtemp(prefix=f"stagelab-{stage}-"))
        self.build_result: BuildResult | None = None
        self.parent_build: BuildResult | None = None
        self.gate_results: list[GateResult] = []
        self.check_results: list[CheckResult] = []
        self.timing_results: list[TimingStats] = []
        self.outcome: Outcome | None = None
        self.run_id: str | None = None
        if track:
            experiment_id = tracking.init_store(experiment)
            self.run_id = mlflow_run_id or tracking.create_run(experiment_id, self.stage.id, self.params.name)
            self._log_start()

    # -- bookkeeping -----------------------------------------------------------------
    def _log_start(self) -> None:
        p = self.params
        tracking.log_params(self.run_id, {
            "stage": self.stage.id,
            "params_file": str(p.path.relative_to(repo_root())) if p.path.is_relative_to(repo_root()) else str(p.path),
            "dtypes": ",".join(p.dtypes),
            "seeds": ",".join(map(str, p.seeds)),
            "shapes": ";".join(s.tag for s in p.shapes),
            "mission_shape": p.mission.tag,
            "timing_dtype": p.timing.dtype,
            "repetitions": p.timing.repetitions,
            "warmup": p.timing.warmup,
            "timing_modes": ",".join(p.timing.modes),
            "sdpa_backends": ",".join(p.timing.backends),
            "min_gain": self.stage.min_gain,
            "arch": ",".join(self.stage.arch),
            **{f"knob.{k}": v for k, v in sorted(self.stage.defines.items())},
        })
        tags = {
            "stage": self.stage.id,
            "parent": self.stage.parent or "none",
            "title": self.stage.title,
            "outcome": "running",
            "mlflow.note.content": f"### {self.stage.title}\n\n{self.stage.hypothesis}",
            **git_state(),
            **software_versions(),
            **(gpu_info() or {"gpu": "none"}),
        }
        tracking.set_tags(self.run_id, tags)

    def _table(self, name: str, frame: pd.DataFrame) -> None:
        if frame.empty:
            return
        frame.to_csv(self.artifacts / f"{name}.csv", index=False)
        (self.artifacts / f"{name}.md").write_text(frame.to_markdown(index=False))

    # -- 1. build ----------------------------------------------------------------------
    def build(self) -> BuildResult:
        try:
            self.build_result = build_stage(self.stage, self.registry)
        except BuildError as exc:
            (self.artifacts / "build.log").write_text(exc.log)
            self.finish(build_error=str(exc).splitlines()[0])
            raise
        (self.artifacts / "ptxas.log").write_text(self.build_result.ptxas_log)
        if self.parent is not None and self.gpu_available:
            self.parent_build = build_stage(self.parent, self.registry)
        if self.run_id:
            b = self.build_result
            tracking.set_tags(self.run_id, {"source_hash": b.source_hash, "build_key": b.key,
                                            "build_cached": str(b.cached).lower(),
                                            "stage_config": b.module.stage_config() if b.module else ""})
            tracking.log_metrics(self.run_id, {"build_seconds": b.seconds})
        return self.build_result

    @property
    def kernel(self) -> StageKernel:
        if self.build_result is None or self.build_result.module is None:
            raise RuntimeError("call build() first")
        return StageKernel(self.build_result.module, self.stage.id)

    def variant(self, **defines) -> StageKernel:
        """The same stage with knobs overridden (cached like any build), for exploration cells."""
        result = build_stage(self.stage.with_defines(defines), self.registry)
        return StageKernel(result.module, self.stage.id)

    # -- 2. resources ------------------------------------------------------------------
    def resources(self) -> pd.DataFrame:
        if self.build_result is None:
            raise RuntimeError("call build() first")
        self.gate_results = evaluate_gates(self.build_result.resources, self.stage.gates)
        frame = pd.DataFrame([r.as_row() for r in self.build_result.resources])
        self._table("resources", frame)
        self._table("gates", pd.DataFrame([g.__dict__ for g in self.gate_results]))
        if self.run_id:
            metrics = {}
            for r in self.build_result.resources:
                metrics[f"registers/{r.tag}"] = r.registers
                metrics[f"shared_memory_bytes/{r.tag}"] = r.total_shared_memory_bytes
                metrics[f"stack_frame_bytes/{r.tag}"] = r.stack_frame_bytes
                metrics[f"spill_stores_bytes/{r.tag}"] = r.spill_store_bytes
                metrics[f"spill_loads_bytes/{r.tag}"] = r.spill_load_bytes
                metrics[f"barriers/{r.tag}"] = r.barriers
            if self.build_result.resources:
                metrics["max_registers"] = frame["registers"].max()
                metrics["max_shared_memory_bytes"] = frame["total_shared_memory_bytes"].max()
                metrics["total_spill_bytes"] = (frame["spill_store_bytes"] + frame["spill_load_bytes"]).sum()
                metrics["max_stack_frame_bytes"] = frame["stack_frame_bytes"].max()
            tracking.log_metrics(self.run_id, metrics)
            tracking.set_tags(self.run_id, {"gates_passed": str(gates_passed(self.gate_results)).lower()})
        return frame

    def gates(self) -> pd.DataFrame:
        return pd.DataFrame([g.__dict__ for g in self.gate_results])

    # -- 3. correctness ----------------------------------------------------------------
    def check(self) -> pd.DataFrame:
        if not self.gpu_available:
            print("no CUDA device: correctness checks skipped (outcome will be no_gpu)")
            return pd.DataFrame()
        kernel = self.kernel
        p = self.params
        bar = _progress(desc=f"{self.stage.id} checks", total=len(p.shapes) * len(p.dtypes) * len(p.seeds))
        self.check_results = check_all(kernel.into, p.shapes, p.dtypes, p.seeds, self.device,
                                       progress=lambda label: (bar.set_postfix_str(label), bar.update(1)))
        bar.close()
        frame = pd.DataFrame([c.as_row() for c in self.check_results])
        self._table("correctness", frame)
        if self.run_id:
            metrics = {"checks_total": len(frame), "checks_failed": int((~frame["passed"]).sum())}
            worst = frame.groupby(["shape", "dtype"]).agg(max_abs_err=("max_abs_err", "max"),
                                                          err_budget_ratio=("err_budget_ratio", "max"))
            for (shape, dtype), row in worst.iterrows():
                metrics[f"max_abs_err/{shape}/{dtype}"] = row["max_abs_err"]
                metrics[f"err_budget_ratio/{shape}/{dtype}"] = row["err_budget_ratio"]
            metrics["max_err_budget_ratio"] = frame["err_budget_ratio"].replace(float("inf"), 1e9).max()
            tracking.log_metrics(self.run_id, metrics)
        return frame

    # -- 4. timing ---------------------------------------------------------------------
    def _contenders(self, shape: Shape, q, k, v, unavailable: dict[str, str]) -> dict:
        scale = default_scale(shape.head_dim)
        stream = lambda: torch.cuda.current_stream().cuda_stream  # noqa: E731  (capture-time stream)
        contenders = {}
        for label, result in ((self.stage.id, self.build_result), ("parent:" + (self.stage.parent or ""), self.parent_build)):
            if result is None or result.module is None:
                continue
            module, out = result.module, torch.empty_like(q)
            contenders[label] = (lambda m=module, o=out: m.forward(q, k, v, o, scale, shape.causal, stream()))
        for backend in self.params.timing.backends:
            try:
                contenders[f"sdpa_{backend}"] = sdpa_contender(backend, q, k, v, scale, shape.causal)
            except RuntimeError as exc:
                unavailable[f"{backend}/{shape.tag}"] = str(exc).splitlines()[0][:200]
        return contenders

    def time(self) -> pd.DataFrame:
        if not self.gpu_available:
            print("no CUDA device: timing skipped (outcome will be no_gpu)")
            return pd.DataFrame()
        spec = self.params.timing
        flush = L2Flusher(self.device)
        unavailable: dict[str, str] = {}
        self.timing_results = []
        for shape in _progress(self.params.timed_shapes(), desc=f"{self.stage.id} timing"):
            q, k, v = make_inputs(shape, TORCH_DTYPES[spec.dtype], self.params.seeds[0], self.device)
            contenders = self._contenders(shape, q, k, v, unavailable)
            self.timing_results += time_contenders(contenders, shape, spec, flush)
            del q, k, v, contenders
            torch.cuda.empty_cache()
        frame = pd.DataFrame([t.as_row() for t in self.timing_results])
        self._table("timing", frame)
        clocks_under_load = read_clocks("after_timing_")
        if unavailable:
            (self.artifacts / "sdpa_unavailable.json").write_text(json.dumps(unavailable, indent=2))
        if self.run_id:
            tracking.log_metrics(self.run_id, self._timing_metrics(frame))
            tracking.set_tags(self.run_id, clocks_under_load)
        return frame

    def speedups(self, frame: pd.DataFrame | None = None) -> pd.DataFrame:
        """Per shape and mode: stage p50 and the ratio of each other contender's p50 to it."""
        frame = pd.DataFrame([t.as_row() for t in self.timing_results]) if frame is None else frame
        if frame.empty:
            return frame
        wide = frame.pivot_table(index=["shape", "mode"], columns="contender", values="p50_us")
        mine = wide[self.stage.id]
        out = pd.DataFrame({"stage_p50_us": mine})
        for contender in wide.columns:
            if contender == self.stage.id:
                continue
            name = "parent" if contender.startswith("parent:") else contender.removeprefix("sdpa_")
            out[f"speedup_vs_{name}"] = wide[contender] / mine
        sdpa_cols = [c for c in wide.columns if c.startswith("sdpa_")]
        if sdpa_cols:
            out["speedup_vs_best_sdpa"] = wide[sdpa_cols].min(axis=1) / mine
        return out.reset_index()

    def _timing_metrics(self, frame: pd.DataFrame) -> dict[str, float]:
        metrics: dict[str, float] = {}
        primary = self.params.timing.modes[0]
        mine = frame[frame["contender"] == self.stage.id]
        for _, row in mine.iterrows():
            suffix = "" if row["mode"] == primary else f"_{row['mode']}"
            for stat in ("p50_us", "p90_us", "p99_us", "iqr_us", "tflops"):
                metrics[f"{stat}{suffix}/{row['shape']}"] = row[stat]
        speedups = self.speedups(frame)
        for _, row in speedups.iterrows():
            suffix = "" if row["mode"] == primary else f"_{row['mode']}"
            for col in speedups.columns:
                if col.startswith("speedup_vs_"):
                    metrics[f"{col}{suffix}/{row['shape']}"] = row[col]
        mission = mine[(mine["shape"] == self.params.mission.tag) & (mine["mode"] == primary)]
        if not mission.empty:
            metrics["mission_p50_us"] = float(mission["p50_us"].iloc[0])
        primary_rows = speedups[speedups["mode"] == primary]
        for col in [c for c in speedups.columns if c.startswith("speedup_vs_")]:
            metrics[f"{col}_geomean"] = geometric_mean(primary_rows[col].dropna().tolist())
        return metrics

    # -- 5. outcome and logging ----------------------------------------------------------
    def evidence(self) -> Evidence:
        speedup = None
        if self.parent is not None and self.timing_results:
            table = self.speedups()
            rows = table[table["mode"] == self.params.timing.modes[0]]
            if "speedup_vs_parent" in rows:
                speedup = geometric_mean(rows["speedup_vs_parent"].dropna().tolist())
        return Evidence(
            built=self.build_result is not None,
            gates_passed=gates_passed(self.gate_results) if self.gate_results else None,
            gpu_available=self.gpu_available,
            checks_passed=(all(c.passed for c in self.check_results) if self.check_results else None),
            has_parent=self.parent is not None,
            speedup_vs_parent=speedup,
            min_gain=self.stage.min_gain,
        )

    def plots(self) -> None:
        from .plots import error_plot, latency_plot

        if self.timing_results:
            frame = pd.DataFrame([t.as_row() for t in self.timing_results])
            for mode in self.params.timing.modes:
                latency_plot(frame, self.artifacts / f"latency_{mode}.png", mode=mode,
                             title=f"{self.stage.id}: p50 latency per shape ({mode})")
        if self.check_results:
            error_plot(pd.DataFrame([c.as_row() for c in self.check_results]), self.artifacts / "error_budget.png",
                       title=f"{self.stage.id}: error / budget")

    def finish(self, build_error: str | None = None) -> Outcome:
        """Decide, log everything, end the MLflow run. Safe to call once the run has any result."""
        if build_error is not None:
            self.outcome = Outcome("build_failed", build_error)
        else:
            self.outcome = decide(self.evidence())
        if not self.run_id:
            return self.outcome
        try:
            self.plots()
        except Exception as exc:  # a plot must never cost the record
            (self.artifacts / "plot_error.txt").write_text(repr(exc))
        tracking.set_tags(self.run_id, {"outcome": self.outcome.outcome, "outcome_reason": self.outcome.reason})
        for path in [self.stage.source, *self.registry.header_files()]:
            tracking.log_artifact(self.run_id, path, "source")
        for path in sorted(self.artifacts.iterdir()):
            tracking.log_artifact(self.run_id, path, "results" if path.suffix in {".csv", ".md", ".json"} else None)
        tracking.end_run(self.run_id, "FINISHED" if self.outcome.outcome != "build_failed" else "FAILED")
        return self.outcome
