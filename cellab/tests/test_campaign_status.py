"""Issue 40: `cellab status DIR` and the live view of `cellab run` share their lines: a finished run's (status,
throughput, delay, the headline metric), the ETA from the mean run time, the folder's holder, and the running
run's last seconds (throughput, RTT, attenuation) read from the telemetry it is writing."""

from __future__ import annotations

import io
import json
import os
import socket
import subprocess
import sys
import textwrap
import time

from rich.console import Console

from cellab.results.holder import holder_of
from cellab.results.store import ResultStore
from cellab.run.live import LiveView
from cellab.run.runner import Runner
from cellab.run.status import status_lines
from cellab.run.view import eta_text, last_seconds
from cellab.testkit.helpers import run_cellab


def _folder(tmp_path, sr: bool = False):
    """A folder of four runs: one ok, one failed, one running (with telemetry), one pending; no holder."""
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(f"""
        name: watched
        lab: wired
        factors: {{cc: [cubic, bbr], n: [1, 2]}}
        workload: {{duration_s: 1{", tool: probe, sr_probes: 10" if sr else ""}}}
    """).replace("n: [1, 2]", "rate_mbit: [5, 10]"))
    runner = Runner.new(path, tmp_path / "out")
    first, second, third, _ = runner.store.planned()
    store = runner.store
    store.start(first)
    store.finish(first, "ok", metrics={"throughput_bps": 8.2e6, "rtt_p95_ms": 61.4, "sr_estimate_ms": 20,
                                       "sr_true_ms": 20}, started_at=time.time() - 40)
    store.start(second)
    store.finish(second, "failed", error="AgentLost: agent ue2: silent for more than 5 s", started_at=time.time() - 20)
    run_dir = store.start(third)
    runner.hold.release()
    return store, run_dir, third


def _telemetry(run_dir, now):
    folder = run_dir / "telemetry"
    folder.mkdir(parents=True, exist_ok=True)
    cell = [{"t_s": now - 3 + i * 0.1, "topic": "cell.summary", "ue": 0, "dl_bytes": 125_000, "attenuation_db": 20.0}
            for i in range(11)]  # 125 kB every 100 ms: 10 Mbit/s
    (folder / "cell.jsonl").write_text("".join(json.dumps(r) + "\n" for r in cell))
    atten = [{"t_s": now - 2, "topic": "attenuation", "channel": 1, "db": 35.5},
             {"t_s": now - 30, "topic": "attenuation", "channel": 2, "db": 60}]  # older than the window
    pings = [{"t_s": now - 1, "topic": "ping", "rtt_ms": 40.0}, {"t_s": now - 0.5, "topic": "ping", "rtt_ms": 50.0}]
    (folder / "atten.jsonl").write_text("".join(json.dumps(r) + "\n" for r in atten))
    (folder / "ue1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in pings) + '{"t_s": ')  # a line being written


def test_last_seconds_reads_throughput_rtt_and_attenuation_from_the_runs_telemetry(tmp_path):
    now = time.time()
    _telemetry(tmp_path, now)
    seen = last_seconds(tmp_path)
    assert abs(seen["throughput_bps"]["ue0"] - 10e6) < 1e3
    assert seen["rtt_ms"] == 45.0
    assert seen["attenuation_db"] == {"ch1": 35.5, "ue0": 20.0}  # channel 2's value is older than the window
    assert last_seconds(tmp_path / "nothing") == {}


def test_without_a_radios_count_the_throughput_is_the_senders_delivery_rate(tmp_path):
    folder = tmp_path / "telemetry"
    folder.mkdir()
    now = time.time()
    rows = [{"t_s": now - 1, "topic": "flow", "source": f"r-a1-{ue}-send/flow-1.jsonl", "rtt_ms": 30.0,
             "delivery_rate_bps": rate} for ue, rate in (("phone-a", 4e6), ("phone-b", 2e6))]
    (folder / "server1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    seen = last_seconds(tmp_path)  # a commercial network: no cell, no eNB agent
    assert seen["throughput_bps"] == {"sender": 6e6} and seen["rtt_ms"] == 30.0


def test_status_prints_cells_run_lines_eta_holder_and_the_running_runs_last_seconds(tmp_path):
    store, run_dir, running = _folder(tmp_path, sr=True)
    _telemetry(run_dir, time.time())
    text = "\n".join(status_lines(store.root))
    assert "no live `cellab run` holds it" in text
    assert "2/4 runs done, 2 left, ETA 1 min 00 s (mean run 30 s)" in text
    assert "cc=cubic rate_mbit=5: 1 ok, 0 failed, 0 invalid, 0 left" in text
    assert "cc=cubic rate_mbit=10: 0 ok, 1 failed, 0 invalid, 0 left" in text
    assert "8.2 Mbit/s  RTT p95 61 ms  SR 20 ms (true 20 ms: right)" in text
    assert "failed   cc=cubic rate_mbit=10  AgentLost: agent ue2: silent for more than 5 s" in text
    # no live holder: the running row is a crash's leftover, said so instead of live numbers
    assert f"run {running.run_id} was left running by a `cellab run` that ended" in text


def test_status_of_a_held_folder_names_the_holder_and_shows_the_running_run(tmp_path):
    store, run_dir, running = _folder(tmp_path)
    _telemetry(run_dir, time.time())
    holder = subprocess.Popen([sys.executable, "-c", "import time\nfrom cellab.results.holder import hold\n"
                               f"h = hold({str(store.root)!r})\nprint('held', flush=True)\ntime.sleep(60)\n"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        assert holder_of(store.root)["pid"] == holder.pid
        result = run_cellab("status", str(store.root), timeout_s=60)
    finally:
        holder.kill()
        holder.wait()
    assert result.returncode == 0, result.stderr
    assert f"held by a live `cellab run`: pid {holder.pid} on host {socket.gethostname()}" in result.stdout
    assert (f"running {running.run_id} cc=bbr rate_mbit=5 for" in result.stdout
            and "throughput ue0 10.0 Mbit/s; RTT 45 ms; attenuation ch1 35.5 dB, ue0 20 dB" in result.stdout), \
        result.stdout
    assert holder_of(store.root) is None  # the holder gone: free, and status wrote nothing
    assert sorted(os.listdir(store.root)) == ["campaign.yaml", "holder.lock", "plan.json", "results.sqlite", "runs"]


def test_status_of_a_folder_that_is_no_campaign_is_an_error_naming_it(tmp_path):
    result = run_cellab("status", str(tmp_path), timeout_s=60)
    assert result.returncode == 2 and f"{tmp_path}: not a campaign result folder" in result.stderr, result.stderr


def test_the_live_view_prints_plain_run_lines_with_the_eta_off_a_terminal(tmp_path):
    store, run_dir, running = _folder(tmp_path)
    _telemetry(run_dir, time.time())
    out = io.StringIO()
    console = Console(file=out, force_terminal=False, width=300)
    with LiveView(console, store.rows, {"factors": {}}, plain_every_s=0.5) as view:
        view.running(running.run_id, running.factors, run_dir)
        time.sleep(2.2)  # the plain line of the running run, every plain_every_s (whole refreshes of 1 s)
        store.finish(running, "ok", metrics={"throughput_bps": 9.9e6, "rtt_p95_ms": 70.0})
        view.finished(running.run_id)
    text = out.getvalue()
    assert f"running {running.run_id} cc=bbr rate_mbit=5" in text and "RTT 45 ms" in text, text
    assert f"{running.run_id} ok       cc=bbr rate_mbit=5  9.9 Mbit/s  RTT p95 70 ms" in text, text
    assert f"[{eta_text(ResultStore.open(store.root).rows())}]" in text
    assert "\x1b[" not in text  # plain: no terminal control codes in a log
