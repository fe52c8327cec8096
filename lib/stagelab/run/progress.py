"""What `stagelab run` shows while it works: a tqdm bar over the stages, the notebooks running now
(and on which GPU) beside it, and a line per stage as it ends; plain lines without the bar."""

from __future__ import annotations


class BatchProgress:
    def __init__(self, total: int, name: str, enabled: bool):
        self.bar = None
        self.running: dict[str, str] = {}  # stage -> where it runs ("GPU 1", or "" on the runner's own)
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=f"stagelab run ({name})", unit="stage")

    def say(self, line: str) -> None:
        if self.bar is not None:
            self.bar.write(line)
        else:
            print(line, flush=True)

    def _show_running(self) -> None:
        if self.bar is not None:
            self.bar.set_postfix_str(", ".join(f"{stage} on {where}" if where else stage
                                               for stage, where in self.running.items()))

    def start(self, stage: str, slot) -> None:
        self.running[stage] = slot.label
        self._show_running()

    def done(self, result, note: str = "") -> None:
        where = self.running.pop(result.stage, "")
        on = f" on {where}" if where else ""
        error = " - " + result.error.splitlines()[0] if result.error else ""
        self.say(f"{result.stage}: {result.outcome} ({result.seconds:.0f}s){on}{note}{error}")
        self._show_running()
        if self.bar is not None:
            self.bar.update(1)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
