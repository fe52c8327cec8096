"""The clock and power notes on timing rows (stagelab.measure.gpu_clocks): nvidia-smi's lines parsed, the
sampler's process started and stopped around a block, and no note at all where there is no tool."""

from __future__ import annotations

import stat
import sys
import time

from stagelab.measure import gpu_clocks
from stagelab.core import metrics as m
from stagelab.measure.gpu_clocks import ClockMonitor, parse_line, summarize


def test_parse_line_reads_clock_power_and_the_power_cap_bit():
    capped = parse_line("1440, 694.53, 0x0000000000000004\n")
    assert capped == gpu_clocks.ClockSample(1440.0, 694.53, True)
    idle = parse_line("1980, 76.99, 0x0000000000000000")
    assert idle.power_capped is False
    # thermal slowdown (0x20) alone is not the power cap
    assert parse_line("1500, 500.0, 0x0000000000000020").power_capped is False


def test_parse_line_rejects_what_is_not_a_sample():
    for text in ("clocks.current.sm [MHz], power.draw [W], clocks_event_reasons.active", "[N/A], [N/A], [N/A]",
                 "No devices were found", "", "1980, 76.99"):
        assert parse_line(text) is None, text


def test_summary_of_samples():
    samples = [parse_line(line) for line in ("1800, 700, 0x4", "1400, 690, 0x4", "1980, 300, 0x0", "1620, 650, 0x4")]
    summary = summarize(samples)
    assert summary.samples == 4
    assert summary.mean_mhz == 1700 and summary.min_mhz == 1400
    assert summary.mean_w == 585 and summary.capped_fraction == 0.75
    assert summary.as_row() == {m.SM_CLOCK_MHZ.name: 1700, m.MIN_SM_CLOCK_MHZ.name: 1400,
                                m.POWER_W.name: 585, m.POWER_CAPPED_PCT.name: 75}
    assert "power-capped 75%" in summary.describe()
    assert summarize([]) is None


def test_monitor_samples_a_sampler_process_and_stops_it(tmp_path):
    """A stand-in for nvidia-smi on a machine without a GPU: a script that prints a header, an
    unreadable line and samples until it is terminated. The monitor keeps the samples, skips the
    rest, and the process is gone when the block ends."""
    script = tmp_path / "fake-smi"
    script.write_text(f"#!{sys.executable}\n"
                      "import sys, time\n"
                      "print('[N/A], [N/A], [N/A]', flush=True)\n"
                      "while True:\n"
                      "    print('1500, 650.5, 0x0000000000000004', flush=True)\n"
                      "    time.sleep(0.02)\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    with ClockMonitor(executable=str(script)) as monitor:
        deadline = time.monotonic() + 10
        while len(monitor.samples) < 3 and time.monotonic() < deadline:
            time.sleep(0.02)
    assert monitor._process.poll() is not None, "the sampler outlives the block"
    summary = monitor.summary()
    assert summary is not None and summary.samples >= 3
    assert summary.mean_mhz == 1500 and summary.capped_fraction == 1.0
    assert monitor.command[1:] == [f"--query-gpu={gpu_clocks.QUERY}", "--format=csv,noheader,nounits",
                                   f"--loop-ms={gpu_clocks.DEFAULT_PERIOD_MS}", "--id=0"]


def test_monitor_without_a_tool_is_silent(tmp_path):
    with ClockMonitor(executable=str(tmp_path / "no-such-nvidia-smi")) as monitor:
        pass
    assert monitor.summary() is None
