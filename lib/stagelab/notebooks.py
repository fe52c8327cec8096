"""Stage notebooks, generated: one source of truth per stage.

A stage notebook is three things put together:
- its intro, from the registry (stages.yaml: title, parent, what changed, hypothesis),
- the common flow, the same cells in every stage notebook so the record is comparable,
- its own exploration, from `notebooks/explore/<stage>.py` (markdown, a line `# %%`, python), where
  the stage has one: without the file the notebook has no exploration section.

`stagelab notebooks` rewrites notebooks/<stage>.ipynb from those sources (without outputs);
`stagelab notebooks --check` fails when a committed notebook differs from what they make.
"""

from __future__ import annotations

from pathlib import Path

from .core.errors import ConfigError
from .core.family import Family, load_family
from .core.family_sources import stage_notebook_file
from .core.paths import repo_root
from .core.registry import Registry, Stage, all_registries

EXPLORE_SEPARATOR = "# %%\n"
# The project's kernelspec (`stagelab lab` installs it into the environment); language_info without
# the version a kernel adds, which differs between machines (lab_contents fills it in JupyterLab)
NOTEBOOK_METADATA = {
    "kernelspec": {"name": "stagelab", "display_name": "Python (stagelab)", "language": "python"},
    "language_info": {"name": "python"},
}


def notebooks_dir() -> Path:
    return repo_root() / "notebooks"


def intro_markdown(stage: Stage, params_file: str, explore: Path | None) -> str:
    parent = f"`{stage.parent}`" if stage.parent else "none (the baseline)"
    parts = [f"# {stage.id}: {stage.title.split(': ', 1)[-1]}", "", f"**Parent.** {parent}", ""]
    if stage.changes:
        parts += [f"**Changed{' vs ' + stage.parent if stage.parent else ''}.** {stage.changes}", ""]
    sources = "the registry (stages.yaml)" + (f" and `notebooks/explore/{stage.id}.py`" if explore else "")
    parts += [f"**Hypothesis.** {stage.hypothesis}", "",
              f"Generated from {sources}; "
              "edit those and run `stagelab notebooks`. Run it interactively (edit the parameters cell) "
              f"or in batch: `stagelab run --stages {stage.id} --params {params_file}`."]
    return "\n".join(parts)


def _parameters_source(stage: Stage, params_file: str, knob_example: str, family: str) -> str:
    return (f'stage = "{stage.id}"\n'
            f'family = "{family}"\n'
            f'params_file = "{params_file}"  # relative to the repo root, or absolute\n'
            "mlflow_run_id = None  # set by `stagelab run`; None starts a fresh MLflow run\n"
            "experiment = None  # None: the family's experiment (stagelab-<family>)\n"
            f"knobs = {{}}  # compile-time overrides of the stage's defines, e.g. {knob_example}\n"
            'steps = None  # None: the parameter file\'s optional steps; else e.g. "sanitize,profile" ("" for none)')


# The steps' intros; the family completes the sentences that depend on what it computes
# (Family.notebook_sanitize_problems, Family.notebook_profile_focus).
def sanitize_intro(family: Family) -> str:
    return ("### Sanitizer\ncompute-sanitizer memcheck, racecheck and synccheck on "
            f"{family.notebook_sanitize_problems}; any error makes the stage `incorrect`. Skipped without a GPU.")


STRESS_INTRO = ("### Stress\nThe checks and dependent-launch chains again and again, with one side of the "
                "kernel's hand-offs delayed at random (STRESS_DELAY_NS) and beside a load kernel; a failure in any "
                "round makes the stage `incorrect` (ordering). Runs with `steps: [stress]`; skipped without a GPU.")

PROTOCOL_INTRO = ("### Protocol\nThe stage built with its ring-protocol checks (SDPA_PROTOCOL=1), launched once per "
                  "problem and dtype; a violation (a slot read before it landed, released before the wgmma reading it "
                  "retired, refilled before its release) makes the stage `incorrect` (protocol). Runs with "
                  "`steps: [protocol]` on the stages that have the checks; skipped without a GPU.")


def profile_intro(family: Family) -> str:
    return ("### Profile\nNsight Compute on the stage's kernels alone, at the mission problem and one long "
            f"problem: {family.notebook_profile_focus}; the `.ncu-rep` "
            "files go with the record. Skipped without a GPU.")

# The build cell's words, by the stage's backend (stages.yaml `backend:`).
BUILD_INTROS = {
    "cuda": ("## 1. Build\nnvcc compiles the torch-free `.cu`; a plain link joins it to the family's "
             "binding (compiled once per family). Cached by source hash, options and architecture."),
    "triton": ("## 1. Build\nTriton compiles the stage file's kernels ahead of time for the registry's "
               "architecture (its `compile_specs()`, with the knobs set); the file's launcher runs them. Cached by "
               "source hash, knobs and architecture."),
    "cute": ("## 1. Build\nCuTe DSL compiles the stage file's `@cute.jit` functions ahead of time for the registry's "
             "architecture (its `compile_specs()`, with the knobs set); the file's launcher compiles them again for "
             "this GPU and runs them. Cached by source hash, knobs and architecture."),
}


def _step_cells(step: str, intro: str) -> list:
    """A step that is one call on the run (skipped at once without a GPU): its intro and the call."""
    from nbformat.v4 import new_code_cell, new_markdown_cell

    return [new_markdown_cell(intro), new_code_cell(f"run.{step}()")]


def _opening_cells(stage: Stage, family: Family, explore: Path | None) -> list:
    """The intro, the parameters cell and the StageRun every later cell uses."""
    from nbformat.v4 import new_code_cell, new_markdown_cell

    return [
        new_markdown_cell(intro_markdown(stage, family.acceptance_params, explore)),
        new_code_cell(_parameters_source(stage, family.acceptance_params, family.knob_example, family.name),
                      metadata={"tags": ["parameters"]}),
        new_code_cell(
            "from IPython.display import Markdown, display\n\n"
            "from stagelab.record.plots import error_plot, latency_plot\n"
            "from stagelab.stage import StageRun\n\n"
            "run = StageRun(stage, params_file, defines=knobs, mlflow_run_id=mlflow_run_id, experiment=experiment,\n"
            "               steps=steps, family=family)\n"
            "display(Markdown(f\"**{run.stage.title}** (parent: `{run.stage.parent}`), \"\n"
            "                 f\"params `{run.params.name}`, GPU available: {run.gpu_available}\"))"),
    ]


def _measuring_cells(stage: Stage, family: Family) -> list:
    """Sections 1 to 4: build, resources, correctness (sanitizer, stress, protocol), timing (profile)."""
    from nbformat.v4 import new_code_cell, new_markdown_cell

    return [
        new_markdown_cell(BUILD_INTROS[stage.backend]),
        new_code_cell("build = run.build()\nprint(build.module.stage_config())\n"
                      "print('cached' if build.cached else 'compiled', f'in {build.seconds:.1f}s, key {build.key}')"),
        new_markdown_cell("## 2. Resources\nRegisters, shared memory, stack and spills per kernel instance, "
                          "from ptxas; the registry's gates judged on them."),
        new_code_cell("display(run.resources())\nrun.gates()"),
        new_markdown_cell("## 3. Correctness\nFloat64 reference; budget `2*max|out_lowprec-ref| + atol`; "
                          "outputs poisoned with NaN; fresh inputs per seed and named input distribution (the parameter "
                          "file's `distributions`); two launches per input."),
        new_code_cell(
            "checks = run.check()\n"
            "if not checks.empty:\n"
            "    display(checks[['shape', 'dtype', 'seed', 'distribution', 'max_abs_err', 'budget', 'err_budget_ratio',\n"
            "                    'passed', 'reason']])\n"
            "    error_plot(checks, title=f'{stage}: error / budget');"),
        *_step_cells("sanitize", sanitize_intro(family)),
        *_step_cells("stress", STRESS_INTRO),
        *_step_cells("protocol", PROTOCOL_INTRO),
        new_markdown_cell("## 4. Timing\nStage, parent and every available library contender on the same inputs, "
                          "in this process, in each timing mode of the parameter file (cold = L2 flushed, "
                          "hot = CUDA-graph replay, throughput = many launches in one graph), beside the "
                          "timing floor (an empty kernel by the same recipe)."),
        new_code_cell(
            "timing = run.time()\n"
            "if not timing.empty:\n"
            "    display(run.speedups())\n"
            "    for mode in run.params.timing.modes:\n"
            "        latency_plot(timing, mode=mode, title=f'{stage}: p50 latency ({mode})')"),
        *_step_cells("profile", profile_intro(family)),
    ]


def _outcome_cells(number: int) -> list:
    from nbformat.v4 import new_code_cell, new_markdown_cell

    return [
        new_markdown_cell(f"## {number}. Outcome\nDecided from the evidence above and logged to MLflow with every "
                          "table, plot, the ptxas log, the kernel source and its diff against the parent."),
        new_code_cell("outcome = run.finish()\n"
                      "display(Markdown(f'**Outcome: `{outcome.outcome}`**: {outcome.reason}'))"),
    ]


def explore_path(registry: Registry, stage: Stage) -> Path | None:
    """explore/<stage>.py beside the stage's notebook (notebooks/explore/ of the checkout; the family
    folder's notebooks/explore/ for a family outside it), where the stage has something of its own
    to explore."""
    path = stage_notebook_file(registry, stage.id).parent / "explore" / f"{stage.id}.py"
    return path if path.is_file() else None


def explore_cells(path: Path) -> list:
    from nbformat.v4 import new_code_cell, new_markdown_cell

    if not path.is_file():
        raise ConfigError(f"no exploration source {path}: write markdown, a line '# %%', then python")
    text = path.read_text()
    if EXPLORE_SEPARATOR not in text:
        raise ConfigError(f"{path}: no line '# %%' between the markdown and the python")
    markdown, python = text.split(EXPLORE_SEPARATOR, 1)
    return [new_markdown_cell("## 5. Exploration\n" + markdown.strip()), new_code_cell(python.strip())]


def stage_notebook(registry: Registry, stage: Stage):
    """The stage's notebook; section 5 (exploration) only where notebooks/explore/<stage>.py exists."""
    from nbformat.v4 import new_notebook

    family = load_family(registry.family)
    explore = explore_path(registry, stage)
    cells = _opening_cells(stage, family, explore) + _measuring_cells(stage, family)
    if explore:
        cells += explore_cells(explore) + _outcome_cells(6)
    else:
        cells += _outcome_cells(5)
    for number, cell in enumerate(cells):  # stable ids: a regenerated notebook diffs by content only
        cell["id"] = f"{stage.id}-{number}"
    return new_notebook(cells=cells, metadata=NOTEBOOK_METADATA)


def _normalized(nb) -> str:
    import nbformat

    return nbformat.writes(nbformat.from_dict(nb))


def write_notebooks(check: bool = False, family: str | None = None) -> list[str]:
    """Regenerate every stage notebook (of one family when given); with check=True write nothing
    and return the stale ones."""
    import nbformat

    stale = []
    for name, registry in all_registries().items():
        if family not in (None, name):
            continue
        for stage in registry.stages.values():
            path = stage_notebook_file(registry, stage.id)
            path.parent.mkdir(parents=True, exist_ok=True)
            fresh = stage_notebook(registry, stage)
            current = nbformat.read(path, as_version=4) if path.is_file() else None
            if current is not None and _normalized(current) == _normalized(fresh):
                continue
            stale.append(stage.id)
            if not check:
                nbformat.write(fresh, path)
    return stale
