"""The part of a stage run (stage.StageRun) that a hang can end, and the stress and protocol steps.

A measuring step runs under `_watched`: when a launch in it hangs (stagelab.measure.watchdog raises
KernelHang), the run records what hung, judges the stage (`incorrect`, reason `hang`), records the
verdict, and calls `on_hang`, which by default ends the process (the CUDA context is lost; the
batch runner then goes on with the next stage).
"""

from __future__ import annotations

import pandas as pd

from ..core.errors import KernelHang


class WatchedSteps:
    """Mixed into StageRun, which provides ctx, results, recorder, finish() and on_hang."""

    def stress(self) -> pd.DataFrame:
        """Checks and chains again and again with the stage's hand-offs delayed on one side at a
        time (and beside a load kernel); a failure makes the stage incorrect (reason `ordering`).
        Skipped without a GPU or without `steps: [stress]` in the parameter file."""
        from .stress import stress_step

        if self.results.built is None:
            raise RuntimeError("call build() first")
        self.results.stress = self._watched(stress_step, self.ctx)
        self.recorder.record_stress(self.results.stress)
        print(f"stress: {self.results.stress.status}")
        return self.results.stress.frame()

    def protocol(self) -> pd.DataFrame:
        """The stage built with its ring-protocol checks (SDPA_PROTOCOL=1), launched once per check problem
        and dtype, its violation record read after each launch; a violation makes the stage incorrect
        (reason `protocol`). Skipped without a GPU, without `steps: [protocol]` in the parameter file, or
        for a stage whose sources have no such checks."""
        from .protocol import protocol_step

        if self.results.built is None:
            raise RuntimeError("call build() first")
        report = self.results.protocol = self._watched(protocol_step, self.ctx)
        self.recorder.record_protocol(report)
        print(f"protocol: {report.status}" + (f" ({report.why_not_run})" if report.why_not_run else ""))
        if report.failures():
            print(f"  FAIL {report.failures()}")
        return report.frame()

    def _watched(self, step, *args, **kwargs):
        """A measuring step under the watchdog: after a hang, the verdict recorded, `on_hang`."""
        try:
            return step(*args, **kwargs)
        except KernelHang as hang:
            self.results.hang = str(hang)
            self.recorder.record_hang(self.results.hang)
            self.finish()
            self.on_hang(hang)
            raise  # on_hang returned (a test's): nothing after the hang may run in this process
