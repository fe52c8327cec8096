"""The SM clock and board power a block of timed GPU work ran at, sampled with nvidia-smi.

Why: an H100 running FP8 attention reaches its board power limit (700 W on the SXM part) and
the driver lowers the SM clock, reason "SW power cap"; on 2026-11-24 the clock moved between
1230 and 1830 MHz from one timed subject to the next in one quick_check call. A kernel's time
is then partly a measure of its energy per launch, and two kernels timed side by side may not
have run at the same clock. A timing row that carries the clock and power it ran at says so.

    with ClockMonitor(smi_device_id(0)) as monitor:
        ... timed launches ...
    monitor.summary()  # ClockSummary, or None where nvidia-smi is missing or said nothing
"""

from __future__ import annotations

import shutil
import subprocess
import threading
from dataclasses import dataclass

from ..core import metrics

# nvidia-smi's clocks_event_reasons.active bit for the software power cap
# (nvmlClocksEventReasonSwPowerCap = 0x4).
SW_POWER_CAP = 0x4
QUERY = "clocks.sm,power.draw,clocks_event_reasons.active"
# A contender's timing takes about a second (warm-up, graph capture, 100 replays): ~10 samples.
DEFAULT_PERIOD_MS = 100
STOP_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class ClockSample:
    clock_mhz: float
    power_w: float
    power_capped: bool


@dataclass(frozen=True)
class ClockSummary:
    samples: int
    mean_mhz: float
    min_mhz: float
    mean_w: float
    capped_fraction: float

    def as_row(self) -> dict:
        """The TimingStats fields (metrics.CLOCK_STATS) this summary fills."""
        return {metrics.SM_CLOCK_MHZ.name: round(self.mean_mhz), metrics.MIN_SM_CLOCK_MHZ.name: round(self.min_mhz),
                metrics.POWER_W.name: round(self.mean_w),
                metrics.POWER_CAPPED_PCT.name: round(100 * self.capped_fraction)}

    def describe(self) -> str:
        capped = f", power-capped {100 * self.capped_fraction:.0f}%" if self.capped_fraction else ""
        return f"{self.mean_mhz:.0f} MHz (min {self.min_mhz:.0f}) {self.mean_w:.0f} W{capped}"


def parse_line(text: str) -> ClockSample | None:
    """One line of `--format=csv,noheader,nounits` for QUERY, e.g. '1980, 345.67, 0x0000000000000004'.
    None for anything else (a header, '[N/A]', an error message)."""
    fields = [field.strip() for field in text.split(",")]
    if len(fields) != 3:
        return None
    try:
        return ClockSample(float(fields[0]), float(fields[1]), bool(int(fields[2], 16) & SW_POWER_CAP))
    except ValueError:
        return None


def summarize(samples: list[ClockSample]) -> ClockSummary | None:
    if not samples:
        return None
    n = len(samples)
    return ClockSummary(samples=n, mean_mhz=sum(s.clock_mhz for s in samples) / n,
                        min_mhz=min(s.clock_mhz for s in samples), mean_w=sum(s.power_w for s in samples) / n,
                        capped_fraction=sum(s.power_capped for s in samples) / n)


def smi_device_id(device_index: int) -> str:
    """nvidia-smi's name for torch's device `device_index`: its PCI address where torch reports
    one (CUDA_VISIBLE_DEVICES renumbers torch's devices, not nvidia-smi's), else the index."""
    import torch

    props = torch.cuda.get_device_properties(device_index)
    parts = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if any(part is None for part in parts):
        return str(device_index)
    domain, bus, device = parts
    return f"{domain:08X}:{bus:02X}:{device:02X}.0"


class ClockMonitor:
    """nvidia-smi sampling one GPU every period_ms while the block runs. Without nvidia-smi (a
    CPU machine, a container without it) the block runs unobserved and summary() is None:
    the clock is a note on a timing, never a reason for the timing to fail."""

    def __init__(self, device: int | str = 0, period_ms: int = DEFAULT_PERIOD_MS, executable: str | None = None):
        self.command = [executable or shutil.which("nvidia-smi") or "", f"--query-gpu={QUERY}",
                        "--format=csv,noheader,nounits", f"--loop-ms={period_ms}", f"--id={device}"]
        self.samples: list[ClockSample] = []
        self._process: subprocess.Popen | None = None
        self._reader: threading.Thread | None = None

    def __enter__(self) -> ClockMonitor:
        if not self.command[0]:
            return self
        try:
            self._process = subprocess.Popen(self.command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                                             text=True)
        except OSError:
            return self
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        return self

    def _read(self) -> None:
        for line in self._process.stdout:
            sample = parse_line(line)
            if sample is not None:
                self.samples.append(sample)

    def __exit__(self, *exc) -> None:
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(timeout=STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
        self._reader.join(timeout=STOP_TIMEOUT_S)

    def summary(self) -> ClockSummary | None:
        return summarize(self.samples)
