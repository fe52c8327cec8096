"""record: what a run leaves behind, in MLflow and in the results pages.

Owns the recorder that logs a judged stage, the flattening of results into metrics, the tracking
store (SQLite or a team server), portable records, provenance, run ownership, the plots, the
runs view, the results pages (and the re-runs that would make them current) and the same-code record (`stagelab same-code`: same_code.yaml). It
may import `core`, `measure` and `judge`.
"""
