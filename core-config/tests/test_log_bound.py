"""The core's daemon logs within the lab's bound (issue 42), with a stand-in daemon: it appends numbered lines to
its log (reopened on SIGHUP, as Open5GS and NextEPC do) and writes each to its stdout too (the agent's NAME.out)."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from cellab.bus.errors import OperationError
from cellab.bus.testing import lab_bus
from cellab.contracts.core import ConfigureParams, CoreClient, StartParams
from cellab.epc.agent import OPEN5GS_BUNDLE, CoreAgent
from cellab.epc.logbound import BoundedLog, CoreLogs, keep_bytes, older, takes_sighup
from cellab.epc.profile import CoreProfile
from cellab.epc.render import render
from cellab.inputs import parse_yaml
from cellab.labs.proc import ManagedProcess
from cellab.sparse import disk_bytes

import pytest

from .conftest import EXAMPLES

MAX_BYTES = 65_536  # the smallest bound $CELLAB_LAB_LOG_MAX_BYTES takes
LINES = 6_000
LINE_BYTES = 100
STEP_S = 0.02

STAND_IN = """
import signal, sys, time
path, count, line_bytes, pause_s, reopens = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4]), \\
    sys.argv[5] == "reopens"
log = open(path, "a", buffering=1)
hup = False
def on_hup(signum, frame):  # noted, and the log reopened by the loop, between lines (as a signal thread does)
    global hup
    hup = True
if reopens:
    signal.signal(signal.SIGHUP, on_hup)
print("stand-in daemon v0 start", flush=True)
for i in range(count):
    if hup:
        hup = False
        log.close()
        log = open(path, "a", buffering=1)
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


FAKE_SRSEPC = """#!{python}
import configparser, sys, time
ini = configparser.ConfigParser()
ini.read(sys.argv[1])
log = open(ini["log"]["filename"], "w", buffering=1)  # as srslog: its own offset, no split, no reopen
for i in range({lines}):
    what = f"Sending Attach Accept IMSI {{i:015d}}" if i % 200 == 0 else "S1AP signalling"
    text = f"{{i:08d}} [NAS ] [I] {{what}} ".ljust({line_bytes} - 1, "x")
    log.write(text + "\\n")
    print(text, flush=True)
    time.sleep(0.0005)
time.sleep(600)
"""


def test_the_core_agent_keeps_an_srsepc_run_within_the_bound_and_finds_every_attach(tmp_path, monkeypatch):
    """The agent's hook: a stand-in srsEPC (no SIGHUP: never sent one) under the agent, the bound from
    $CELLAB_LAB_LOG_MAX_BYTES; its log and stdout freed behind the reader, every attach among the findings."""
    monkeypatch.setenv("CELLAB_LAB_LOG_MAX_BYTES", str(MAX_BYTES))
    program = tmp_path / "srsepc"
    program.write_text(FAKE_SRSEPC.format(python=sys.executable, lines=LINES, line_bytes=LINE_BYTES))
    program.chmod(0o755)
    agent_kwargs = {"core1": {"programs": {"srsepc": str(program)}}}
    with lab_bus(tmp_path, {"core1": CoreAgent}, agent_kwargs=agent_kwargs) as (ctl, agents):
        core = CoreClient(ctl, "core1", timeout_s=30)
        conf = core.configure(ConfigureParams(profile_yaml=(EXAMPLES / "srsran-zmq.yaml").read_text()))
        logs = agents["core1"].artifact_dir / conf.run_dir / "logs"
        try:
            core.start(StartParams(settle_s=0.5))
            most, deadline = 0, time.monotonic() + 60
            while time.monotonic() < deadline:
                status = core.status()
                most = max(most, *(disk_bytes(logs / name) for name in ("epc.log", "epc.out")))
                attaches = [f for f in status.findings if f.kind == "attach_ok"]
                if len(attaches) == LINES // 200:
                    break
                time.sleep(0.1)
            assert status.daemons[0].running  # no SIGHUP ended it
        finally:
            core.stop()
    print(f"srsEPC stand-in: most held {most} B of disk per file, {LINES * LINE_BYTES} B written (N = {MAX_BYTES})")
    assert [int(f.line[:8]) for f in attaches] == list(range(0, LINES, 200))
    assert (logs / "epc.log").stat().st_size == LINES * LINE_BYTES and most <= MAX_BYTES
    assert disk_bytes(logs / "epc.log") < LINES * LINE_BYTES // 4  # freed behind the reader


def test_the_real_open5gs_daemon_reopens_its_log_on_the_bounds_sighup_and_no_line_is_lost(require_root, netns_prefix,
                                                                                         tmp_path):
    """Open5GS's SGW-U (the bundle's v2.7.7) under a bound its start-up lines already pass: renamed, sent
    SIGHUP (its signal thread waits for it), it reopens NAME.log; its "SIGHUP received" line, written to the
    renamed file, is read there before the new one."""
    program = OPEN5GS_BUNDLE / "bin" / "open5gs-sgwud"
    if not program.is_file():
        pytest.skip(f"the Open5GS bundle is absent ({OPEN5GS_BUNDLE})")
    logs = tmp_path / "logs"
    logs.mkdir()
    profile = CoreProfile.model_validate(parse_yaml((EXAMPLES / "srsran-zmq-open5gs.yaml").read_text(), "profile"))
    render(profile.model_copy(update={"log_dir": str(logs)}), "open5gs", tmp_path / "config",
           open5gs_prefix=OPEN5GS_BUNDLE)
    ns = f"{netns_prefix}o5log"
    subprocess.run(["ip", "netns", "add", ns], check=True)
    try:
        subprocess.run(["ip", "-n", ns, "link", "set", "lo", "up"], check=True)
        proc = ManagedProcess([str(program), "-c", str(tmp_path / "config" / "sgwu.yaml")], logs / "sgwu.out",
                              netns=ns)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and not (proc.running() and takes_sighup(proc.proc.pid)):
            time.sleep(0.05)
        bounded = BoundedLog(logs / "sgwu.log", 1024, True, lambda: proc.proc.pid if proc.running() else None)
        read = bounded.step()  # its start-up lines, more than keep_bytes(1024): renamed, SIGHUP sent
        while time.monotonic() < deadline and not (logs / "sgwu.log").exists():
            time.sleep(0.05)
        read += bounded.step()
        assert proc.running(), (logs / "sgwu.out").read_text()[-400:]
        proc.stop()
    finally:
        subprocess.run(["ip", "netns", "del", ns], check=False)
    assert any("SGW-U initialize...done" in line for line in read)
    assert any("SIGHUP received" in line for line in read)  # in the renamed file, read before the new one
    assert (logs / "sgwu.log.1").exists() and (logs / "sgwu.log").exists()


def test_a_bad_bound_fails_configure_naming_the_variable_and_makes_no_run_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("CELLAB_LAB_LOG_MAX_BYTES", "12")  # below the smallest bound
    with lab_bus(tmp_path, {"core1": CoreAgent}) as (ctl, agents):
        core = CoreClient(ctl, "core1", timeout_s=30)
        with pytest.raises(OperationError) as err:
            core.configure(ConfigureParams(profile_yaml=(EXAMPLES / "srsran-zmq.yaml").read_text()))
        assert "$CELLAB_LAB_LOG_MAX_BYTES" in str(err.value)
        assert not (agents["core1"].artifact_dir / "core-runs").exists() or \
            not any((agents["core1"].artifact_dir / "core-runs").iterdir())
