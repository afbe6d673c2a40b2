"""The core's daemon logs within the lab's bound (issue 42), with a stand-in daemon: it appends numbered lines to
its log (reopened on SIGHUP, as Open5GS and NextEPC do) and writes each to its stdout too (the agent's NAME.out)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from cellab.epc.logbound import BoundedLog, CoreLogs, keep_bytes, older
from cellab.labs.proc import ManagedProcess
from cellab.sparse import disk_bytes

MAX_BYTES = 65_536  # the smallest bound $CELLAB_LAB_LOG_MAX_BYTES takes
LINES = 6_000
LINE_BYTES = 100
STEP_S = 0.02

STAND_IN = """
import signal, sys, time
path, count, line_bytes, pause_s, reopens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), \\
    sys.argv[5] == "reopens"
log = open(path, "a", buffering=1)
def reopen(signum, frame):
    global log
    log.close()
    log = open(path, "a", buffering=1)
if reopens:
    signal.signal(signal.SIGHUP, reopen)
print("stand-in daemon v0 start", flush=True)
for i in range(count):
    what = f"Attach complete IMSI[{i:015d}]" if i % 200 == 0 else "S1 signalling"
    text = f"{i:08d} [mme] INFO: {what} ".ljust(line_bytes - 1, "x")
    log.write(text + "\\n")
    print(text, flush=True)
    time.sleep(pause_s)
"""


def _stand_in(tmp_path: Path, reopens: bool, pause_s: float = 0.0005) -> tuple[ManagedProcess, Path]:
    script = tmp_path / "daemon.py"
    script.write_text(STAND_IN)
    logs = tmp_path / "logs"
    logs.mkdir()
    argv = [sys.executable, str(script), str(logs / "mme.log"), str(LINES), str(LINE_BYTES), str(pause_s),
            "reopens" if reopens else "no"]
    return ManagedProcess(argv, logs / "mme.out"), logs


def _numbers(lines: list[str]) -> list[int]:
    return [int(line[:8]) for line in lines if line[:8].isdigit()]


def _run_bounded(tmp_path: Path, reopens: bool) -> tuple[dict[str, list[str]], dict[str, int], ManagedProcess]:
    """Both files stepped every STEP_S until the stand-in ends: the lines each read, the most each held."""
    proc, logs = _stand_in(tmp_path, reopens)
    pid = lambda: proc.proc.pid if proc.running() else None  # noqa: E731
    files = {"log": BoundedLog(logs / "mme.log", MAX_BYTES, True, pid),
             "out": BoundedLog(logs / "mme.out", MAX_BYTES, False, pid)}
    read: dict[str, list[str]] = {"log": [], "out": []}
    most = {"log": 0, "out": 0}
    while True:
        ended = not proc.running()
        for name, bounded in files.items():
            read[name] += bounded.step()
            held = disk_bytes(bounded.path) + disk_bytes(older(bounded.path))
            most[name] = max(most[name], held)
        if ended:
            break
        time.sleep(STEP_S)
    proc.stop()
    print(f"most held of {LINES * LINE_BYTES} B written (N = {MAX_BYTES}): {most}")
    return read, most, proc


def test_a_daemon_log_reopened_on_sighup_stays_within_the_bound_and_every_line_is_read(tmp_path):
    read, most, proc = _run_bounded(tmp_path, reopens=True)
    assert proc.proc.returncode == 0  # the SIGHUPs reopened its log, none ended it
    assert _numbers(read["log"]) == list(range(LINES))  # every line once, in order, across NAME.1 and NAME
    assert _numbers(read["out"]) == list(range(LINES))
    assert most["log"] <= MAX_BYTES and most["out"] <= MAX_BYTES
    log, rotated = tmp_path / "logs" / "mme.log", older(tmp_path / "logs" / "mme.log")
    assert rotated.exists()  # the halves: NAME.1 then NAME, one log again, its latest lines whole
    joined = _numbers((rotated.read_text() + log.read_text()).splitlines())
    assert joined == list(range(LINES - len(joined), LINES))
    assert len(joined) * LINE_BYTES >= keep_bytes(MAX_BYTES)


def test_a_daemon_that_does_not_take_sighup_is_never_sent_one_and_its_log_is_freed_instead(tmp_path):
    read, most, proc = _run_bounded(tmp_path, reopens=False)
    assert proc.proc.returncode == 0
    assert _numbers(read["log"]) == list(range(LINES))
    assert most["log"] <= MAX_BYTES and most["out"] <= MAX_BYTES
    log = tmp_path / "logs" / "mme.log"
    assert not older(log).exists() and log.stat().st_size == LINES * LINE_BYTES  # freed, not renamed
    assert log.read_text().startswith("00000000 ")  # its head kept


def test_the_findings_hold_every_attach_even_those_in_halves_long_rotated_away(tmp_path):
    proc, logs = _stand_in(tmp_path, reopens=True)
    core_logs = CoreLogs(logs, MAX_BYTES, period_s=STEP_S)
    core_logs.watch("mme", lambda: proc.proc.pid if proc.running() else None, reopens=True)
    core_logs.start()
    try:
        proc.wait(60)
    finally:
        core_logs.stop()
        proc.stop()
    findings = core_logs.findings()
    attaches = [f.line for f in findings if f.kind == "attach_ok"]
    # one finding per attach line (its copy on stdout is the same line): every 200th line
    assert [int(line[:8]) for line in attaches] == list(range(0, LINES, 200))
    assert (logs / "mme.log.1").exists()
