"""Campaigns end to end on the wired lab, through the real bus and real agents (root)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from pyroute2 import netns

CAMPAIGN = """
name: {name}
lab: wired
repeat: {repeat}
order: {{mode: sequential}}
factors:
  cc: [cubic, bbr]
fixed: {{rate_mbit: 10, buffer_bytes: 60000}}
workload: {{duration_s: {duration}, ping_interval_ms: 100}}
timeouts: {{run_s: 60, request_s: 6}}
retry: {{max_attempts: {attempts}, backoff_s: 0.5}}
"""


def campaign(tmp_path: Path, name="t", repeat=1, duration=2, attempts=1) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(CAMPAIGN.format(name=name, repeat=repeat, duration=duration, attempts=attempts)))
    return path


def cellab(*args: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cellab", *args], capture_output=True, text=True, timeout=300, **kwargs)


def rows(folder: Path) -> list[tuple]:
    with sqlite3.connect(folder / "results.sqlite") as db:
        return db.execute("SELECT run_id, status, attempts, finished_at, error FROM runs ORDER BY idx").fetchall()


def only_folder(out: Path) -> Path:
    folders = [p for p in out.iterdir() if p.is_dir()]
    assert len(folders) == 1, folders
    return folders[0]


def test_campaign_runs_and_reports(require_root, netns_prefix, tmp_path):
    out = tmp_path / "out"
    result = cellab("run", str(campaign(tmp_path)), "--out", str(out), "--prefix", netns_prefix)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = only_folder(out)
    assert [r[1] for r in rows(folder)] == ["ok", "ok"]
    for run_id, *_ in rows(folder):
        run_dir = folder / "runs" / run_id
        metrics = json.loads((run_dir / "metrics.json").read_text())
        assert 6e6 < metrics["throughput_bps"] <= 10.3e6  # the 10 Mbit/s bottleneck carried the flow
        assert metrics["rtt_samples"] >= 10 and metrics["rtt_mean_ms"] > 0
        manifest = json.loads((run_dir / "manifest.json").read_text())
        assert set(manifest["clock_offsets"]) == {"server", "ue0"}
        assert abs(manifest["clock_offsets"]["ue0"]["offset_s"]) < 0.05  # same host: near zero
        assert manifest["params"]["cc"] == metrics["congestion_control"]
    html = (folder / "report.html").read_text()
    assert html.count("data:image/png;base64,") >= 3 and "throughput" in html
    assert (folder / "report" / "throughput-vs-delay.svg").exists()
    assert not [n for n in netns.listnetns() if n.startswith(netns_prefix + "-")]


def test_kill_9_controller_then_resume(require_root, netns_prefix, tmp_path):
    out = tmp_path / "out"
    proc = subprocess.Popen([sys.executable, "-m", "cellab", "run", str(campaign(tmp_path, repeat=2)), "--out", str(out),
                             "--prefix", netns_prefix, "--no-report"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            time.sleep(0.3)
            folders = list(out.iterdir()) if out.exists() else []
            if folders and (folders[0] / "results.sqlite").exists():
                statuses = [r[1] for r in rows(folders[0])]
                if statuses.count("ok") >= 1 and "running" in statuses:
                    break
        else:
            pytest.fail("the campaign never got one run done")
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(10)
    finally:
        if proc.poll() is None:
            proc.kill()
    folder = only_folder(out)
    before = {r[0]: r for r in rows(folder)}
    finished = {k for k, r in before.items() if r[1] == "ok"}
    interrupted = {k for k, r in before.items() if r[1] == "running"}
    assert finished and len(interrupted) == 1
    result = cellab("run", "--resume", str(folder), "--prefix", netns_prefix)
    assert result.returncode == 0, result.stdout + result.stderr
    after = {r[0]: r for r in rows(folder)}
    assert len(after) == 4 and all(r[1] == "ok" for r in after.values())
    for run_id in finished:  # not repeated
        assert after[run_id][2] == 1 and after[run_id][3] == before[run_id][3]
    (redone,) = interrupted
    assert after[redone][2] == 2
    assert not [n for n in netns.listnetns() if n.startswith(netns_prefix + "-")]


def _pid_of(match) -> int | None:
    """The pid of the first process whose argv (a list of bytes) satisfies match."""
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if match(argv):
                return int(pid)
    return None


def run_disturbed(campaign_path: Path, out: Path, prefix: str, disturb) -> tuple[subprocess.Popen, str]:
    """`cellab run` with disturb() called 1.5 s into the first run's first attempt; the run's output."""
    proc = subprocess.Popen([sys.executable, "-m", "cellab", "run", str(campaign_path), "--out", str(out),
                             "--prefix", prefix, "--no-report"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            time.sleep(0.2)
            folders = list(out.iterdir()) if out.exists() else []
            if folders and (folders[0] / "results.sqlite").exists() and rows(folders[0])[0][1] == "running":
                break
        time.sleep(1.5)  # mid-request: the workload is under way
        disturb()
        output, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    return proc, output


def test_agent_killed_mid_run_is_reported_and_the_retry_succeeds(require_root, netns_prefix, tmp_path):
    def kill_ue_agent() -> None:
        marker = f"--netns {netns_prefix}-ue0"
        victim = _pid_of(lambda argv: b"cellab" in b" ".join(argv) and b"agent" in argv
                         and marker.encode() in b" ".join(argv))
        assert victim, "UE agent process not found"
        os.kill(victim, signal.SIGKILL)

    proc, output = run_disturbed(campaign(tmp_path, duration=4, attempts=2), tmp_path / "out", netns_prefix,
                                 kill_ue_agent)
    assert proc.returncode == 0, output
    assert "ue0" in output and "attempt 1/2 failed" in output
    folder = only_folder(tmp_path / "out")
    first = rows(folder)[0]
    assert first[1] == "ok" and first[2] == 2


VIRTUAL = """
name: vcell
lab: virtual
factors:
  scheme:
    cubic: {cc: cubic}
    scubic-bdp20: {cc: scubic, module_params: {scubic: {min_bdp_pkts: 20}}}
    scubic: {cc: scubic}
fixed: {n_prb: 25, sr_period_ms: 20, core_delay_ms: 10}
workload: {duration_s: 3, ping_interval_ms: 100}
timeouts: {run_s: 60, request_s: 15}
retry: {max_attempts: 2, backoff_s: 1}
"""


def test_virtual_lab_campaign_loads_a_bpf_module_sets_its_params_per_run_and_unloads_it(
        require_root, netns_prefix, tmp_path):
    from cellab.server import modules
    from cellab.server.experiment import bpf_lock

    path = tmp_path / "v.yaml"
    path.write_text(VIRTUAL)
    out = tmp_path / "out"
    with bpf_lock():  # registered congestion controls are host-wide; other test runs take the same lock
        if "scubic" in modules.loaded():
            pytest.fail("scubic is already registered by something else; the test needs a clean host")
        result = cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix)
        still_loaded = modules.loaded()
    assert result.returncode == 0, result.stdout + result.stderr
    folder = only_folder(out)
    by_scheme = {}
    for run_id, *_ in rows(folder):
        manifest = json.loads((folder / "runs" / run_id / "manifest.json").read_text())
        metrics = json.loads((folder / "runs" / run_id / "metrics.json").read_text())
        by_scheme[manifest["factors"]["scheme"]] = (manifest, metrics)
        assert (folder / "runs" / run_id / "cell_tti.bin").stat().st_size > 0  # the cell's ground truth came back
    # this test is about the runner loading a module, setting its parameters per run and unloading it
    assert {s: m["congestion_control"] for s, (_, m) in by_scheme.items()} == {
        "cubic": "cubic", "scubic-bdp20": "scubic", "scubic": "scubic"}
    for _, metrics in by_scheme.values():  # 25 PRB at CQI 15: 18.3 Mbit/s by the TBS table, never more
        assert 12e6 < metrics["throughput_bps"] < 18.4e6
    # the run that set a parameter got it; the run after it is back on the module's default (10 packets)
    assert by_scheme["cubic"][0]["module_params"] == {}
    assert by_scheme["scubic-bdp20"][0]["module_params"]["scubic"]["min_bdp_pkts"] == 20
    assert by_scheme["scubic"][0]["module_params"]["scubic"]["min_bdp_pkts"] == 10
    assert "scubic" not in still_loaded


def test_an_unknown_module_parameter_fails_the_campaign_before_any_run(require_root, netns_prefix, tmp_path):
    path = tmp_path / "v.yaml"
    path.write_text(VIRTUAL.replace("min_bdp_pkts: 20", "min_bdp: 20"))
    out = tmp_path / "out"
    result = cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix)
    assert result.returncode != 0
    assert "module_params.scubic.min_bdp: unknown parameter (allowed: min_bdp_pkts, ssthresh_at_exit, ttl_ms)" in \
        result.stdout + result.stderr
    assert all(status == "pending" for _, status, *_ in rows(only_folder(out)))


ATTENUATION = """
name: vatten
lab: virtual
factors:
  attenuation_db: [0, 45]
fixed: {n_prb: 25, core_delay_ms: 10}
workload: {duration_s: 3, ping_interval_ms: 100}
timeouts: {run_s: 60, request_s: 15}
retry: {max_attempts: 2, backoff_s: 1}
"""


def test_virtual_lab_attenuation_goes_through_the_serial_driver(require_root, netns_prefix, tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text(ATTENUATION)
    out = tmp_path / "out"
    result = cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = only_folder(out)
    throughput = {}
    for run_id, *_ in rows(folder):
        manifest = json.loads((folder / "runs" / run_id / "manifest.json").read_text())
        metrics = json.loads((folder / "runs" / run_id / "metrics.json").read_text())
        db = manifest["params"]["attenuation_db"]
        # the attenuator agent's driver read the value back from the emulated Mini-Circuits box
        assert manifest["attenuation_applied_db"] == {"1": float(db)}
        throughput[db] = metrics["throughput_bps"]
    assert throughput[45] < 0.7 * throughput[0], throughput  # a weaker channel: lower CQI, smaller TBS


def test_a_schedule_refused_at_start_stops_the_capture(require_root, netns_prefix, tmp_path):
    # A drive log is read when its schedule is first played (validation only resolves its path): a broken
    # one fails at the schedule's start, after the server capture began. Each attempt must fail for that
    # reason (not "a capture is already running" left by the first).
    (tmp_path / "drive.csv").write_text("time,speed\n0,12\n")
    path = tmp_path / "s.yaml"
    path.write_text(textwrap.dedent("""
        name: sched
        lab: virtual
        fixed: {schedule: drive}
        schedules: {drive: {drive_log: drive.csv}}
        workload: {duration_s: 1, ping_interval_ms: null}
        measurements: [throughput, pcap]
        timeouts: {run_s: 60, request_s: 6}
        retry: {max_attempts: 2, backoff_s: 0.1}
    """))
    out = tmp_path / "out"
    result = cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix)
    assert result.returncode == 1, result.stdout + result.stderr
    ((_, status, attempts, _, error),) = rows(only_folder(out))
    assert status == "failed" and attempts == 2
    assert "drive.csv" in error and "capture" not in error, error


def test_a_run_the_host_stalled_fails_naming_the_stall_and_is_retried(require_root, netns_prefix, tmp_path):
    path = tmp_path / "t.yaml"
    path.write_text(textwrap.dedent("""
        name: stall
        lab: virtual
        fixed: {n_prb: 25, core_delay_ms: 10}
        workload: {duration_s: 3, ping_interval_ms: 100}
        timeouts: {run_s: 60, request_s: 15}
        retry: {max_attempts: 2, backoff_s: 0.1}
    """))
    def stall_cell() -> None:  # what a host that deschedules the VM does to the cell
        cell = _pid_of(lambda argv: argv[0].endswith(b"cellab-cell")
                       and any(a.startswith(f"{netns_prefix}-".encode()) for a in argv))
        assert cell, "cellab-cell not found"
        os.kill(cell, signal.SIGSTOP)
        time.sleep(0.4)
        os.kill(cell, signal.SIGCONT)

    out = tmp_path / "out"
    proc, output = run_disturbed(path, out, netns_prefix, stall_cell)
    assert proc.returncode == 0, output
    said = " ".join(output.split())  # rich folds long lines
    assert "the host stalled the virtual cell" in said and "1 clock resyncs" in said, output
    folder = only_folder(out)
    ((run_id, status, attempts, _, _),) = rows(folder)
    assert status == "ok" and attempts == 2
    timing = json.loads((folder / "runs" / run_id / "manifest.json").read_text())["lab_timing"]
    assert timing["resyncs"] == 0 and timing["ttis"] > 3000 and timing["late_ttis"] <= 0.04 * timing["ttis"], timing
    metrics = json.loads((folder / "runs" / run_id / "metrics.json").read_text())
    assert metrics["late_tti_pct"] == pytest.approx(100 * timing["late_ttis"] / timing["ttis"])
    assert metrics["clock_resyncs"] == 0
    report = cellab("report", str(folder))
    assert report.returncode == 0, report.stdout + report.stderr
    assert "late TTIs (%)" in (folder / "report.html").read_text()
