"""`stagelab server`, `import`, `ui`, `runs` and `backup`: the MLflow store, not the stages."""

from __future__ import annotations

import sys

from ..run.server import DEFAULT_HOST, DEFAULT_PORT


def _families():
    from ..core.family import load_family
    from ..core.registry import all_registries

    return [load_family(name) for name in all_registries()]


def _print_links(family, base: str) -> None:
    """The family's summaries and best-stage marks brought up to date, then a link to each view:
    the stage comparison first (the answer), the trials, the tunes."""
    from ..record import runs_view, tracking, ui_refresh

    c = tracking.client()
    found = c.get_experiment_by_name(family.experiment)
    if found is not None:
        print(ui_refresh.refresh(family), flush=True)
    for experiment, views in ((family.experiment, (("", runs_view.STAGES), (" trials", runs_view.TRIALS))),
                              (family.tune_experiment, (("", runs_view.TUNES),))):
        found = c.get_experiment_by_name(experiment)
        if found is None:
            continue
        runs_view.install(c, found)  # a store written before stagelab set its views
        for suffix, view in views:
            print(f"{experiment}{suffix}: {view.url(base, found.experiment_id)}", flush=True)


def _cmd_ui(args) -> int:
    """The MLflow UI on the store stagelab writes to: MLFLOW_TRACKING_URI when set, else the default SQLite store."""
    from ..core.stopping import run_until_stopped
    from ..record import tracking

    uri = tracking.tracking_uri()
    remote = uri.startswith(("http://", "https://"))
    if not remote:
        tracking.relocate_local_store()  # a store copied from another machine opens with its artifacts
    base = uri if remote else f"http://{args.host}:{args.port}"
    for family in _families():
        _print_links(family, base)
    if remote:
        print(f"MLFLOW_TRACKING_URI points at a tracking server: open {uri} in a browser")
        return 0
    command = [sys.executable, "-m", "mlflow", "server", "--backend-store-uri", uri,
               "--host", args.host, "--port", str(args.port)]
    artifacts = tracking.artifact_location()
    if artifacts:
        command += ["--default-artifact-root", artifacts]
    # MLflow's own landing page opens an experiment on its GenAI side; the links above do not
    print(f"MLflow UI for {uri} at http://{args.host}:{args.port}: open a link above (the stage comparison "
          "first)", flush=True)
    if args.dry_run:
        print(" ".join(command))
        return 0
    return run_until_stopped(command)  # Ctrl-C or kill stops the server (and its workers) too


def _cmd_runs(args) -> int:
    """Stage runs still RUNNING, each with its owner and whether that owner is gone; --repair closes
    the ones whose owner is gone as killed."""
    from ..run.repair import close_stale, open_runs

    found = open_runs()
    for run in found:
        owner = f"pid {run.owner.pid} on {run.owner.host}" if run.owner.host else "owner not recorded"
        action = " -> marked KILLED" if args.repair and run.gone_reason else ""
        if action:
            close_stale(run)
        print(f"{run.experiment}  {run.name}  {run.run_id}  {owner}  {run.state}{action}")
    stale = sum(1 for run in found if run.gone_reason)
    print(f"{len(found)} running stage run(s), {stale} with their owner gone"
          + ("" if args.repair or not stale else " (stagelab runs --repair closes them)"))
    return 0


def _cmd_backup(args) -> int:
    from pathlib import Path

    from ..record import tracking
    from ..core.errors import StoreError
    from ..record.sqlite_store import sqlite_path
    from ..record.sqlite_store import backup

    db = sqlite_path(tracking.tracking_uri())
    if db is None:
        raise StoreError(f"stagelab backup copies SQLite stores; {tracking.tracking_uri()} is a server: "
                         "back up its database with the database's own tools (pg_dump, say)")
    if not db.is_file():
        raise StoreError(f"no MLflow store at {db} yet: nothing to back up")
    tracking.check_store()  # a damaged store is reported, not copied over as if it were a good backup
    if args.record:
        from ..record.portable import pack_record

        size = pack_record(db, Path(args.record))
        print(f"packed {db} as the record {args.record} ({size / 2**20:.2f} MiB)")
        return 0
    print(f"backed up {db} to {backup(db, Path(args.to) if args.to else None)}")
    return 0


def _cmd_server(args) -> int:
    """The team server: PostgreSQL store, proxied artifacts; clients set MLFLOW_TRACKING_URI to its address."""
    from ..core.stopping import run_until_stopped
    from ..run.server import server_command

    command = server_command(args.backend_store_uri, args.artifacts_destination, args.host, args.port)
    print(f"team server on http://{args.host}:{args.port}; on each client: "
          f"export MLFLOW_TRACKING_URI=http://<this machine>:{args.port}", flush=True)
    if args.dry_run:
        print(" ".join(command))
        return 0
    return run_until_stopped(command)


def import_sources(given: list[str]) -> list:
    """The stores `stagelab import` names, each a folder (its mlflow.db), a mlflow.db or a record
    (*.db.xz, *.db.gz); a glob the shell left unexpanded (quoted) is expanded here, in order. Every one is
    checked before any is imported: a name that matches nothing is an error naming it."""
    import glob
    from pathlib import Path

    from ..core.errors import ConfigError
    from ..record.portable import RECORD_SUFFIXES

    found, missing = [], []
    for name in given:
        matches = sorted(glob.glob(name)) if glob.has_magic(name) else [name]
        for match in matches:
            source = Path(match)
            db = source / "mlflow.db" if source.is_dir() else source
            (found if db.is_file() else missing).append(db)
        if not matches:
            missing.append(Path(name))
    if missing:
        raise ConfigError(f"stagelab import: nothing to import at {', '.join(map(str, missing))} (give a store's "
                          f"folder, its mlflow.db or a record {' or '.join('*' + s for s in RECORD_SUFFIXES)}); "
                          "nothing was imported")
    return list(dict.fromkeys(found))  # a store named twice (a glob and its name) is imported once


def _cmd_import(args) -> int:
    from ..record import tracking
    from ..core.family import known_families
    from ..record.conclusions_file import FILE_NAME as CONCLUSIONS_FILE, apply_conclusions
    from ..record.portable import import_record, import_store, is_record

    total = 0
    for db in import_sources(args.stores):
        copied = import_record(db) if is_record(db) else import_store(db)
        total += copied
        print(f"imported {copied} new run(s) from {db} into {tracking.tracking_uri()}", flush=True)
    print(f"imported {total} new run(s) in all")
    noted = apply_conclusions(known_families())
    if noted:
        print(f"{noted} trial run(s) given the conclusion kept for them (docs/results/<family>/{CONCLUSIONS_FILE})")
    return 0


def add_parsers(sub) -> None:
    """`server`, `import`, `ui`, `runs` and `backup`: looking after the store rather than running stages."""
    srv = sub.add_parser("server", help="the team's MLflow server: PostgreSQL store, artifacts proxied into a folder")
    srv.add_argument("--backend-store-uri", required=True, help="postgresql://user@host:port/database")
    srv.add_argument("--artifacts-destination", required=True, help="folder the server keeps artifacts in")
    srv.add_argument("--host", default=DEFAULT_HOST, help="address to listen on (default: this machine only)")
    srv.add_argument("--port", type=int, default=DEFAULT_PORT)
    srv.add_argument("--dry-run", action="store_true", help="print the server command instead of running it")
    srv.set_defaults(func=_cmd_server)

    imp = sub.add_parser("import", help="merge stores brought back from other machines (each its mlruns/ folder, "
                         "its mlflow.db, or a compressed record of one, *.db.xz or *.db.gz; several, or a glob such as "
                         "'docs/results/sdpa/records/*.db.*') into stagelab's store; runs already imported are skipped")
    imp.add_argument("stores", nargs="+", metavar="store")
    imp.set_defaults(func=_cmd_import)

    ui = sub.add_parser("ui", help="the MLflow UI on stagelab's store (honours MLFLOW_TRACKING_URI)")
    ui.add_argument("--host", default=DEFAULT_HOST)
    ui.add_argument("--port", type=int, default=DEFAULT_PORT)
    ui.add_argument("--dry-run", action="store_true", help="print the server command instead of running it")
    ui.set_defaults(func=_cmd_ui)

    runs = sub.add_parser("runs", help="list stage runs still RUNNING and whether their owner is gone")
    runs.add_argument("--repair", action="store_true", help="mark runs whose owner is gone KILLED")
    runs.set_defaults(func=_cmd_runs)

    bak = sub.add_parser("backup", help="copy the SQLite store with SQLite's online backup API "
                         "(default: mlruns/backups/mlflow-<time>.db beside it)")
    where = bak.add_mutually_exclusive_group()
    where.add_argument("--to", default=None, help="file to write the copy to")
    where.add_argument("--record", default=None, metavar="F.db.xz",
                       help="pack the copy as a record for docs/results/<family>/records/ (VACUUMed, xz -9e)")
    bak.set_defaults(func=_cmd_backup)
