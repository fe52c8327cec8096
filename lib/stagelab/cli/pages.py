"""`stagelab report` and `notebooks`: the results pages and the generated stage notebooks."""

from __future__ import annotations

from .workspace import add_family_option


# `report --gpu all`: a page for every GPU with runs of the files.
ALL_GPUS = "all"


def _cmd_report(args) -> int:
    from ..record.report import build_report, report_gpus
    from ..record.rerun_plan import rerun_summary

    gpus = [args.gpu]
    if args.gpu == ALL_GPUS:  # none found: the default's own clear error (no runs, or none with a GPU)
        gpus = report_gpus(args.params, family=args.family, experiment=args.experiment) or [None]
    # oldest first: each page also becomes the experiment's description, and the newest GPU's should stay
    for gpu in reversed(gpus):
        report = build_report(args.params, family=args.family, out_dir=args.out, experiment=args.experiment, gpu=gpu)
        print(f"wrote {report.path}", flush=True)
        print(rerun_summary(report.reruns, report.gpu), flush=True)
    return 0


def _cmd_notebooks(args) -> int:
    from ..notebooks import write_notebooks

    stale = write_notebooks(check=args.check, family=args.family)
    if args.check:
        if stale:
            print("stale notebooks (run `stagelab notebooks`): " + ", ".join(stale))
            return 1
        print("every stage notebook matches its sources")
        return 0
    print("rewrote: " + (", ".join(stale) or "nothing (all up to date)"))
    return 0


def _cmd_lab(args) -> int:
    import subprocess
    from pathlib import Path

    from ..lab_contents import install_kernelspec, lab_command
    from ..notebooks import notebooks_dir

    print(f"kernelspec {install_kernelspec()}", flush=True)
    folder = Path(args.notebook_dir) if args.notebook_dir else notebooks_dir()
    return subprocess.call(lab_command(folder, port=args.port, open_browser=not args.no_browser))


def add_parsers(sub) -> None:
    """`report`, `notebooks` and `lab`: pages written from the store, notebooks from their sources, and
    JupyterLab on them."""
    rep = sub.add_parser("report", help="write docs/results/<family>/<gpu>.md (+ plot) from the MLflow store")
    rep.add_argument("--params", nargs="+", default=None,
                     help="parameter-file names whose latest runs the page shows (default: the family's "
                          "report_params, e.g. sdpa's acceptance and long)")
    rep.add_argument("--out", default=None, help="folder (default docs/results/<family>)")
    rep.add_argument("--gpu", default=None, help=f"GPU name as tagged (default: the newest run's GPU); "
                                                 f"'{ALL_GPUS}': a page for every GPU with runs of the files")
    rep.add_argument("--family", default="sdpa", help="kernel family (default sdpa)")
    rep.add_argument("--experiment", default=None, help="MLflow experiment (default: stagelab-<family>)")
    rep.set_defaults(func=_cmd_report)

    nbs = sub.add_parser("notebooks", help="regenerate stage notebooks from stages.yaml and notebooks/explore/")
    nbs.add_argument("--check", action="store_true", help="write nothing; exit 1 when a notebook is stale")
    add_family_option(nbs, "only this family's notebooks (a family outside the repo: in its folder's notebooks/)")
    nbs.set_defaults(func=_cmd_notebooks)

    lab = sub.add_parser("lab", help="JupyterLab on the stage notebooks, on the project's kernel (they open unmodified)")
    lab.add_argument("--notebook-dir", default=None, help="folder to serve (default: the checkout's notebooks/)")
    lab.add_argument("--port", type=int, default=None)
    lab.add_argument("--no-browser", action="store_true")
    lab.set_defaults(func=_cmd_lab)
