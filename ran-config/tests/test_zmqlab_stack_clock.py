"""The srsran-zmq lab measured on its own clock (issue 37): each run keeps the ZMQ broker's stack clock
(stack-clock-dl.bin, stack-clock-ul.bin in its folder), its summary in lab_timing.stack_clock and its speed as the
stack_speed metric. A run merely slower than real time (this host runs the stack at 0.3-0.6 of it) is valid; a run
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
from cellab.testing import only_folder, pid_in_netns, result_rows

LOCK_WAIT_S = 900.0  # another srsRAN test or session may hold the stack for minutes
STOP_S = 1.0
GAP_BOUND_MS = 200


def _stop_srsue_once(out: Path, prefix: str, run_n: int, stopped: list[float], stop: threading.Event) -> None:
    """Once run `run_n` (1-based) has its folder and iperf3 runs in UE 0's namespace (plus a second): srsue
    stopped for STOP_S, its wall times kept in `stopped`."""
    ue = None
    while not stop.is_set() and ue is None:
        runs = [p for p in out.glob("*/runs/*") if p.is_dir()]
        if len(runs) >= run_n and pid_in_netns(f"{prefix}-ue0", "iperf3"):
            time.sleep(1.0)
            ue = pid_in_netns(f"{prefix}-core", "srsue")
        time.sleep(0.05)
    if ue is None:
        return
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
    out, stopped, stop = tmp_path / "out", [], threading.Event()
    watcher = threading.Thread(target=_stop_srsue_once, args=(out, "zqc", 2, stopped, stop), daemon=True)
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
    assert len(stopped) == 2, "srsue was never stopped: run 2's iperf3 was not seen"
    (slow_id, slow_status, _, _, slow_error), (stalled_id, stalled_status, _, _, stalled_error) = rows
    runs = folder / "runs"
    slow = json.loads((runs / slow_id / "manifest.json").read_text())
    clock = slow["lab_timing"]["stack_clock"]
    print(f"slow run: speed {clock['speed']} (p5 {clock['speed_p5']}, p95 {clock['speed_p95']}), {clock['ttis']} "
          f"TTIs, worst gap {clock['max_gap_ms']} ms; stalled run: {stalled_error}")
    assert slow_status == "ok", (slow_error, clock)
    assert clock["source"] == "stack-clock-dl" and clock["stalls"] == [] and clock["max_gap_ms"] < GAP_BOUND_MS
    assert 0.05 < clock["speed"] < 1.1 and clock["ttis"] > 1000, clock
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
