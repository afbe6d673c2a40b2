"""The srsran-zmq lab measured on its own clock (issue 37): each run keeps the ZMQ broker's stack clock
(stack-clock-dl.bin, stack-clock-ul.bin in its folder), its summary in lab_timing.stack_clock and its speed as the
stack_speed metric. A run merely slow is valid: srsenb stopped SLOW_STOP_S of every SLOW_STOP_S + SLOW_RUN_S
(SIGSTOP/SIGCONT, a starved host: test_zmqlab_starved.py) runs well below real time with gaps under the bound. A run
during which srsue was stopped (SIGSTOP) for STOP_S, longer than retry.max_stack_gap_ms, is invalid naming the
stall. Over ZMQ a stopped srsue stops the whole stack (the broker's downlink waits for every UE's request), so no
TTI passes the broker for STOP_S. STOP_S stays under srsRAN's ZMQ receive timeout (2000 ms), so the stack lives."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cellab.labs.clock import StackClock
from cellab.testkit.helpers import only_folder, pid_in_netns, result_rows

LOCK_WAIT_S = 900.0  # another srsRAN test or session may hold the stack for minutes
STOP_S = 1.0
SLOW_STOP_S, SLOW_RUN_S = 0.04, 0.02
GAP_BOUND_MS = 200


def _once_iperf3_runs(out: Path, prefix: str, run_n: int, program: str, stop: threading.Event) -> int | None:
    """The pid of `program` in the core namespace once run `run_n` (1-based) has its folder and iperf3 runs in UE
    0's namespace."""
    while not stop.is_set():
        runs = [p for p in out.glob("*/runs/*") if p.is_dir()]
        if len(runs) >= run_n and pid_in_netns(f"{prefix}-ue0", "iperf3"):
            return pid_in_netns(f"{prefix}-core", program)
        time.sleep(0.05)
    return None


def _slow_then_stall(out: Path, prefix: str, cycles: list[int], stopped: list[float], stop: threading.Event) -> None:
    """Run 1: srsenb duty-cycled while its iperf3 runs (until run 2's folder). Run 2: a second into its iperf3,
    srsue stopped for STOP_S, its wall times kept in `stopped`."""
    enb = _once_iperf3_runs(out, prefix, 1, "srsenb", stop)
    try:
        while enb is not None and not stop.is_set() and len([p for p in out.glob("*/runs/*") if p.is_dir()]) < 2:
            os.kill(enb, signal.SIGSTOP)
            time.sleep(SLOW_STOP_S)
            os.kill(enb, signal.SIGCONT)
            cycles.append(1)
            time.sleep(SLOW_RUN_S)
    except ProcessLookupError:
        pass
    finally:
        if enb is not None:
            try:
                os.kill(enb, signal.SIGCONT)
            except ProcessLookupError:
                pass
    ue = _once_iperf3_runs(out, prefix, 2, "srsue", stop)
    if ue is None:
        return
    time.sleep(1.0)
    try:
        os.kill(ue, signal.SIGSTOP)
        stopped.append(time.time())
        time.sleep(STOP_S)
    finally:
        os.kill(ue, signal.SIGCONT)
        stopped.append(time.time())


@pytest.mark.root
@pytest.mark.extended  # two srsRAN runs (about 2 min); make test checks the rule on synthetic clocks
@pytest.mark.timeout(LOCK_WAIT_S + 900)
def test_a_slow_run_is_valid_on_its_clock_and_a_stalled_one_is_invalid_naming_the_stall(bundle, tmp_path):
    env = os.environ | {"CELLAB_SRSRAN_BIN": str(bundle), "CELLAB_SRSRAN_LOCK_TIMEOUT_S": str(int(LOCK_WAIT_S))}
    camp = tmp_path / "camp.yaml"
    camp.write_text("name: zmq-clock\nlab: srsran-zmq\nrepeat: 2\n"
                    "fixed: {n_prb: 15, cc: cubic, ues: 1, sr_period_ms: 20}\n"
                    "workload: {tool: iperf3, duration_s: 6}\n"
                    "timeouts: {run_s: 150, request_s: 10}\n"
                    f"retry: {{max_attempts: 1, backoff_s: 0, max_stack_gap_ms: {GAP_BOUND_MS}}}\n")
    out, cycles, stopped, stop = tmp_path / "out", [], [], threading.Event()
    watcher = threading.Thread(target=_slow_then_stall, args=(out, "zqc", cycles, stopped, stop), daemon=True)
    watcher.start()
    try:
        proc = subprocess.run([sys.executable, "-m", "cellab", "run", str(camp), "--out", str(out), "--prefix", "zqc",
                               "--no-report"], capture_output=True, text=True, timeout=LOCK_WAIT_S + 600, env=env)
    finally:
        stop.set()
        watcher.join(STOP_S + 5)
    folder = only_folder(out)
    rows = result_rows(folder)
    assert len(rows) == 2, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert cycles, "srsenb was never slowed: run 1's iperf3 was not seen"
    assert len(stopped) == 2, "srsue was never stopped: run 2's iperf3 was not seen"
    (slow_id, slow_status, _, _, slow_error), (stalled_id, stalled_status, _, _, stalled_error) = rows
    runs = folder / "runs"
    slow = json.loads((runs / slow_id / "manifest.json").read_text())
    clock = slow["lab_timing"]["stack_clock"]
    print(f"slow run: speed {clock['speed']} (p5 {clock['speed_p5']}, p95 {clock['speed_p95']}), {clock['ttis']} "
          f"TTIs, worst gap {clock['max_gap_ms']} ms; stalled run: {stalled_error}")
    assert slow_status == "ok", (slow_error, clock)
    assert clock["source"] == "stack-clock-dl" and clock["stalls"] == [] and clock["max_gap_ms"] < GAP_BOUND_MS
    assert 0.05 < clock["speed"] < 0.6 and clock["ttis"] > 1000, clock  # slow, and valid
    dl = StackClock.from_file(runs / slow_id / "stack-clock-dl.bin")  # the file the summary hashed
    assert dl.file_sha256 == clock["file_sha256"]
    assert StackClock.from_file(runs / slow_id / "stack-clock-ul.bin").ttis > 1000

    assert stalled_status == "invalid", (stalled_status, stalled_error)
    assert "the stack clock does not cover the workload: the stack stalled" in stalled_error, stalled_error
    assert f"bound retry.max_stack_gap_ms {GAP_BOUND_MS}" in stalled_error, stalled_error
    stalled = json.loads((runs / stalled_id / "manifest.json").read_text())["lab_timing"]["stack_clock"]
    gaps = [s["gap_ms"] for s in stalled["stalls"]]
    assert gaps and STOP_S * 1000 * 0.9 < max(gaps) < STOP_S * 1000 + 1000, stalled
    at = max(stalled["stalls"], key=lambda s: s["gap_ms"])["at_wall_s"]
    assert stopped[0] - 0.5 < at < stopped[1], (at, stopped)  # the stall is where srsue was stopped
