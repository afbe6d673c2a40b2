"""The cell on a recorded stack clock (`clock_file`, `cellab-cell --clock`): at half speed it delivers per stack
second what it delivers at real time, each TTI runs at its recorded time, real time past the recording's end; a bad
clock file is refused naming the file and the record, before any namespace is touched."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest
from cellab.emulator.params import validate_params
from cellab.emulator.ttilog import read_ttilog
from cellab.emulator.vlab import SERVER_ADDR
from netlab import finish, start_iperf3_download

from cellab.errors import InputErrors
from cellab.labs.clock import StackClock
from cellab.paths import find_program

HEADER = {"format": "cellab-stack-clock", "version": 1, "direction": "dl", "sample_rate_hz": 5760000,
          "samples_per_tti": 5760, "clock": "CLOCK_REALTIME", "run_id": "", "first_tti": 0}
HALF_SPEED_NS = 2_000_000  # 500 TTIs per wall second


def write_clock(path: Path, times_ns: np.ndarray, header: dict | None = None, tail: bytes = b"") -> Path:
    line = json.dumps(header or HEADER).encode() + b"\n"
    path.write_bytes(line + np.asarray(times_ns, dtype="<i8").tobytes() + tail)
    return path


def steady(n: int, step_ns: int) -> np.ndarray:
    return time.time_ns() + np.arange(n, dtype=np.int64) * step_ns


BAD = {  # name: (header, times, tail, what the message names)
    "truncated": (None, np.arange(1, 11) * HALF_SPEED_NS, b"\x01\x02\x03", "record 10"),
    "not monotonic": (None, np.array([1, 2, 3, 3, 4]) * HALF_SPEED_NS, b"", "record 3"),
    "wrong header": ({**HEADER, "format": "pcap"}, np.arange(1, 11) * HALF_SPEED_NS, b"", "format"),
    "wrong samples per TTI": ({**HEADER, "samples_per_tti": 5}, np.arange(1, 11) * HALF_SPEED_NS, b"",
                              "samples_per_tti"),
    "no records": (None, np.zeros(0, dtype=np.int64), b"", "record"),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_clock_file_is_refused_naming_file_and_record(name, tmp_path):
    header, times, tail, names = BAD[name]
    path = write_clock(tmp_path / "stack-clock-dl.bin", times, header, tail)
    # the cell: exit 2 before any namespace is touched (this one does not exist)
    out = subprocess.run([str(find_program("cellab-cell")), "--srv", "cellab-no-such-ns:t",
                          "--ue", "cellab-no-such-ns:t:10.0.0.1", "--clock", str(path)],
                         capture_output=True, text=True, timeout=10)
    assert out.returncode == 2
    assert str(path) in out.stderr and names in out.stderr and "namespace" not in out.stderr, out.stderr
    # the virtual lab's parameter (campaign validation): an input error naming the field, the file and the record
    with pytest.raises(InputErrors) as exc:
        validate_params({"clock_file": str(path)}, "campaign.yaml")
    text = str(exc.value)
    assert "Traceback" not in text
    assert "campaign.yaml" in text and "clock_file" in text and str(path) in text and names in text, text


def test_missing_clock_file_is_refused(tmp_path):
    with pytest.raises(InputErrors, match="clock_file"):
        validate_params({"clock_file": str(tmp_path / "none.bin")})


def _delivered_per_stack_s(tti_log: Path, window_ttis: tuple[int, int]) -> float:
    """UE 0's delivered bits per stack second over TTIs [a, b) counted from its first delivery."""
    d = read_ttilog(tti_log).ue(0)["dl_delivered_bytes"].astype(np.int64)
    first = int(np.argmax(d > 0))
    a, b = window_ttis
    assert len(d) >= first + b, f"the cell ran {len(d)} TTIs, the window needs {first + b}"
    return float(d[first + a:first + b].sum()) * 8 / ((b - a) / 1000)


def _stats(lab) -> dict:
    with lab.control() as ctl:
        return ctl.stats()


def _download(lab, stack_s: float, speed: float, out: Path) -> dict[str, Path]:
    server, client = start_iperf3_download(lab.srv_ns, SERVER_ADDR, lab.ue_ns(0), stack_s / speed, cc="cubic")
    finish(server, client, timeout=stack_s / speed + 20)
    return lab.collect(out)


def test_half_speed_clock_delivers_per_stack_second_as_real_time(vlab, tmp_path):
    window = (400, 1700)  # stack TTIs after the first delivery: past slow start, before the download ends
    lab = vlab(n_prb=25)
    real = _delivered_per_stack_s(_download(lab, 2.2, 1.0, tmp_path / "real")["cell_tti_log"], window)

    n = 2600  # 5.2 wall s
    recorded = steady(n, HALF_SPEED_NS)
    clock_file = write_clock(tmp_path / "half.bin", recorded)
    lab.configure({"clock_file": str(clock_file)})
    arts = _download(lab, 2.2, 0.5, tmp_path / "half")
    half = _delivered_per_stack_s(arts["cell_tti_log"], window)
    assert abs(half / real - 1) < 0.05, f"delivered per stack second: half speed {half / 1e6:.2f} Mbit/s, " \
                                        f"real time {real / 1e6:.2f}"

    # the TTI log matches the clock: the cell's own clock has TTI k at the recorded time of TTI k (offset)
    while (stats := _stats(lab))["tti"] < n + 300:  # past the recording's end
        time.sleep(0.1)
    arts = lab.collect(tmp_path / "half")
    own = StackClock.from_file(arts["stack_clock_dl"])
    ran_s = np.array([own.wall_at(k + 1) for k in range(n + 200)])  # record k: the end of TTI k, tti_at k + 1
    err_ms = ((ran_s[:n] - ran_s[0]) - (recorded - recorded[0]) / 1e9) * 1000
    assert np.median(np.abs(err_ms)) < 0.25 and np.mean(np.abs(err_ms) < 1.0) > 0.95, \
        f"TTI vs recorded time: median {np.median(np.abs(err_ms)):.3f} ms, p99 {np.percentile(np.abs(err_ms), 99):.3f}"
    speed = lab.stack_clock(tmp_path / "half").summary(stall_ms=50, end_wall_s=ran_s[n - 1])
    assert speed.speed is not None and abs(speed.speed - 0.5) < 0.02
    # past the end: the cell says so and goes on at real time
    assert stats["clock"]["ended"] and stats["clock"]["ttis"] == n
    events = [json.loads(line) for line in arts["cell_log"].read_text().splitlines() if '"clock_end"' in line]
    assert [e["tti"] for e in events] == [n]
    assert abs(np.median(np.diff(ran_s[n:n + 200])) * 1000 - 1.0) < 0.05
