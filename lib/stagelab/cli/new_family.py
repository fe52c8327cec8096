"""`stagelab new-family NAME --dir DIR [--backend cuda|triton]`: a working family to start from.

It writes DIR/NAME/ with one `s0_naive` stage (a `.cu` with its torch binding, or a Triton `.py`),
`family.py` (a float64 reference and torch as the contender) and `params/acceptance.yaml`. Right
away, without edits and without a GPU, `STAGELAB_FAMILY_PATH=DIR stagelab stages --family NAME`
lists the stage and `... resources --family NAME s0_naive` builds it and prints its registers.
"""

from __future__ import annotations

from pathlib import Path

BACKENDS = ("cuda", "triton")
TEMPLATES = Path(__file__).resolve().parent.parent / "templates" / "family"
PLACEHOLDER = "__FAMILY__"
CLASS_PLACEHOLDER = "__CLASS__"


def class_name(family: str) -> str:
    return "".join(part.capitalize() for part in family.split("_")) + "Family"


def skeleton_files(backend: str) -> dict[Path, Path]:
    """Destination (relative to the family folder) -> template file, for one backend."""
    files = {}
    for folder in (TEMPLATES / "common", TEMPLATES / backend):
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            files[path.relative_to(folder)] = path
    return files


def write_family(name: str, directory: Path, backend: str) -> Path:
    """The skeleton written into directory/name; nothing is overwritten."""
    from ..core.errors import ConfigError

    if not name.isidentifier() or name.startswith("_"):
        raise ConfigError(f"family name {name!r}: use letters, digits and underscores, starting with a letter")
    if backend not in BACKENDS:
        raise ConfigError(f"--backend {backend!r}: choose one of {', '.join(BACKENDS)}")
    folder = directory.resolve() / name
    if folder.exists():
        raise ConfigError(f"{folder} already exists; pick another name or folder (nothing was written)")
    for relative, template in skeleton_files(backend).items():
        target = folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        text = template.read_text().replace(PLACEHOLDER, name).replace(CLASS_PLACEHOLDER, class_name(name))
        target.write_text(text)
    return folder


def _cmd_new_family(args) -> int:
    folder = write_family(args.name, Path(args.dir), args.backend)
    where = Path(args.dir).resolve()
    print(f"wrote the {args.name} family ({args.backend}) in {folder}:")
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        print(f"  {path.relative_to(folder)}")
    print("next, without a GPU:")
    print(f"  export STAGELAB_FAMILY_PATH={where}")
    print(f"  stagelab stages --family {args.name}")
    print(f"  stagelab resources --family {args.name} s0_naive")
    print(f"on a GPU machine: stagelab run --family {args.name}  (records to ./mlruns here, or MLFLOW_TRACKING_URI)")
    return 0


def add_parsers(sub) -> None:
    """`new-family`: a family skeleton outside the repo."""
    new = sub.add_parser("new-family", help="write a working kernel family skeleton into a folder of yours")
    new.add_argument("name", help="the family's name (letters, digits, underscores)")
    new.add_argument("--dir", required=True, help="the folder to write NAME/ into (put it on STAGELAB_FAMILY_PATH)")
    new.add_argument("--backend", choices=BACKENDS, default="cuda", help="the first stage's language (default cuda)")
    new.set_defaults(func=_cmd_new_family)
