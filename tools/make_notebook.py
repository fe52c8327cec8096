"""Write a stage notebook from the common flow plus the stage's own exploration cells.

    python tools/make_notebook.py s0_baseline notebooks/s0_baseline.ipynb --explore explore_s0.py

The common cells are identical in every stage notebook (so the record is
comparable); the narrative and the exploration differ per stage and are
passed in as markdown and python sources. Notebooks are written without outputs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook


def common_cells(stage: str, intro: str) -> tuple[list, list]:
    head = [
        new_markdown_cell(intro),
        new_code_cell(
            f'stage = "{stage}"\n'
            'params_file = "params/acceptance.yaml"  # relative to the repo root, or absolute\n'
            "mlflow_run_id = None  # set by `stagelab run`; None starts a fresh MLflow run\n"
            'experiment = "stagelab-sdpa"\n'
            "knobs = {}  # compile-time overrides of the stage's defines, e.g. {\"KV_TILE\": 32}",
            metadata={"tags": ["parameters"]},
        ),
        new_code_cell(
            "from IPython.display import Markdown, display\n\n"
            "from stagelab.plots import error_plot, latency_plot\n"
            "from stagelab.stage import StageRun\n\n"
            "run = StageRun(stage, params_file, defines=knobs, mlflow_run_id=mlflow_run_id, experiment=experiment)\n"
            "display(Markdown(f\"**{run.stage.title}** (parent: `{run.stage.parent}`), \"\n"
            "                 f\"params `{run.params.name}`, GPU available: {run.gpu_available}, MLflow run `{run.run_id}`\"))"
        ),
        new_markdown_cell("## 1. Build\nnvcc compiles the torch-free `.cu`; cpp_extension links the shared binding. "
                          "Cached by source hash, options and architecture."),
        new_code_cell(
            "build = run.build()\n"
            "print(build.module.stage_config())\n"
            "print('cached' if build.cached else 'compiled', f'in {build.seconds:.1f}s, key {build.key}')"
        ),
        new_markdown_cell("## 2. Resources\nRegisters, shared memory, stack and spills per kernel instance, "
                          "from ptxas; the registry's gates judged on them."),
        new_code_cell("display(run.resources())\nrun.gates()"),
        new_markdown_cell("## 3. Correctness\nFloat64 reference; budget `2*max|out_lowprec-ref| + atol`; "
                          "outputs poisoned with NaN; fresh inputs per seed; two launches per input."),
        new_code_cell(
            "checks = run.check()\n"
            "if not checks.empty:\n"
            "    display(checks[['shape', 'dtype', 'seed', 'max_abs_err', 'budget', 'err_budget_ratio', 'passed', 'reason']])\n"
            "    error_plot(checks, title=f'{stage}: error / budget');"
        ),
        new_markdown_cell("## 4. Timing\nStage, parent and every available SDPA backend on the same inputs, "
                          "in this process; cold = L2 flushed between launches, hot = CUDA-graph replay."),
        new_code_cell(
            "timing = run.time()\n"
            "if not timing.empty:\n"
            "    display(run.speedups())\n"
            "    for mode in run.params.timing.modes:\n"
            "        latency_plot(timing, mode=mode, title=f'{stage}: p50 latency ({mode})')"
        ),
    ]
    tail = [
        new_markdown_cell("## 6. Outcome\nDecided from the evidence above and logged to MLflow with every table, "
                          "plot, the ptxas log and the kernel source."),
        new_code_cell(
            "outcome = run.finish()\n"
            "display(Markdown(f'**Outcome: `{outcome.outcome}`**: {outcome.reason}'))"
        ),
    ]
    return head, tail


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("stage")
    parser.add_argument("output", type=Path)
    parser.add_argument("--intro", type=Path, required=True, help="markdown: title, hypothesis, what changed")
    parser.add_argument("--explore", type=Path, required=True,
                        help="markdown then python, separated by a line '# %%': the stage's own exploration")
    args = parser.parse_args()
    head, tail = common_cells(args.stage, args.intro.read_text().strip())
    explore_md, explore_py = args.explore.read_text().split("# %%\n", 1)
    explore = [new_markdown_cell("## 5. Exploration\n" + explore_md.strip()), new_code_cell(explore_py.strip())]
    nb = new_notebook(cells=head + explore + tail, metadata={
        "kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"},
        "language_info": {"name": "python"},
    })
    nbformat.write(nb, args.output)


if __name__ == "__main__":
    main()
