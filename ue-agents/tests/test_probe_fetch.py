"""cellab-probe fetch against cellab-send on loopback: the protocol, per-packet timing, logs, bad input."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest
from cellab.testkit.helpers import free_port
from cellab.contracts.ue import FetchRequest, ProbeFlow
from cellab.ue.probe_runner import fetch_argv, run_fetch, validate_fetch

from cellab.errors import InputErrors
from cellab.paths import BUILD_BIN, PROJECT_ROOT

PROBE = BUILD_BIN / "cellab-probe"
SEND = BUILD_BIN / "cellab-send"


@pytest.fixture(scope="module", autouse=True)
def bins() -> None:
    subprocess.run(["make", "-s", str(PROBE), str(SEND)], cwd=PROJECT_ROOT, check=True, capture_output=True,
                   timeout=300)


def test_bad_requests_name_field_and_allowed_values():
    with pytest.raises(InputErrors) as err:
        validate_fetch({"server": "10.0.0.1", "flows": [{"size_bytes": 1000}], "control": "fast"})
    text = str(err.value)
    assert "control" in text and "none" in text and "exll" in text and "dfcsd" in text
    with pytest.raises(InputErrors, match="flows.0"):
        validate_fetch({"server": "10.0.0.1", "flows": [{"size_bytes": 1000, "duration_s": 2}]})
    with pytest.raises(InputErrors, match="server"):
        validate_fetch({"server": "10.0.0.1; rm -rf /", "flows": [{"size_bytes": 1000}]})
    with pytest.raises(InputErrors, match="cc"):
        validate_fetch({"server": "10.0.0.1", "flows": [{"size_bytes": 1000, "cc": "cubic --x"}]})


def test_argv_is_a_list_with_every_flow(tmp_path):
    req = FetchRequest(server="10.0.0.1", flows=[ProbeFlow(size_bytes=10 << 20, cc="cubic"),
                                                 ProbeFlow(duration_s=2, start_ms=500, tag=3)],
                       control="dfcsd", sr_probes=10, ms_log=True)
    argv, files = fetch_argv(req, tmp_path, "run1", PROBE)
    assert argv[:2] == [str(PROBE), "fetch"]
    assert argv.count("--flow") == 2 and "bytes=10485760,start_ms=0,tag=0,cc=cubic" in argv
    assert "seconds=2,start_ms=500,tag=3" in argv and argv[argv.index("--sr-probes") + 1] == "10"
    assert "--sr-probes-max" not in argv  # the probe's own default budget, 2 x 10
    budgeted, _ = fetch_argv(req.model_copy(update={"sr_probes_max": 40}), tmp_path, "run1", PROBE)
    assert budgeted[budgeted.index("--sr-probes-max") + 1] == "40"
    assert "--stack-tti-ms" not in argv  # a stack in real time gives no ruler of the lab's
    ruled, _ = fetch_argv(req.model_copy(update={"stack_tti_ms": 1.5}), tmp_path, "run1", PROBE)
    assert ruled[ruled.index("--stack-tti-ms") + 1] == "1.5000"
    with pytest.raises(ValueError, match="sr_probes_max"):
        FetchRequest(server="10.0.0.1", flows=[ProbeFlow(duration_s=2)], sr_probes=10, sr_probes_max=5)
    assert set(files) == {"summary", "packet_log", "ms_log"}


def test_the_labs_tti_ruler_is_bounded_here_and_in_the_probe():
    for bad in (0.1, 25, float("nan")):
        with pytest.raises(InputErrors, match="stack_tti_ms"):
            validate_fetch({"server": "10.0.0.1", "flows": [{"size_bytes": 1000}], "stack_tti_ms": bad})
    refused = subprocess.run([str(PROBE), "fetch", "--server", "10.0.0.1", "--seconds", "1", "--stack-tti-ms", "0.2"],
                             capture_output=True, text=True, timeout=30)
    assert refused.returncode == 2 and "--stack-tti-ms '0.2' must be a number of ms in 0.5..20" in refused.stderr


def test_usage_errors_exit_2_with_the_allowed_values():
    proc = subprocess.run([str(PROBE), "fetch", "--server", "127.0.0.1", "--bytes", "1M", "--control", "fast"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "allowed: none, exll, dfcsd" in proc.stderr
    proc = subprocess.run([str(PROBE), "fetch", "--server", "127.0.0.1", "--flow", "bytes=1M,speed=9"],
                          capture_output=True, text=True, check=False)
    assert proc.returncode == 2 and "unknown key 'speed'" in proc.stderr


def test_two_concurrent_flows_with_per_packet_log(tmp_path, sender):
    req = FetchRequest(server="127.0.0.1", port=sender, timeout_s=20, ms_log=True,
                       flows=[ProbeFlow(size_bytes=4 << 20, cc="cubic"), ProbeFlow(size_bytes=1 << 20, start_ms=5)])
    result = run_fetch(req, tmp_path, "lo")
    s = result.summary
    assert result.returncode == 0 and s["status"] == "ok"
    assert [r["bytes_read"] for r in s["requests"]] == [4 << 20, 1 << 20]
    assert all(r["complete"] and r["sender_status"] == 0 and r["sender_flow_id"] > 0 for r in s["requests"])
    expected_ts = "packet-ns" if os.geteuid() == 0 else "socket-coarse"
    assert s["timestamps"] == expected_ts
    log = result.artifacts["packet_log"].read_text().splitlines()
    assert log[0].startswith("# cellab-probe events") and len(log) > 20
    if expected_ts == "packet-ns":
        # payload bytes seen on the wire = bytes read + the 16-byte response, per flow
        assert [f["bytes"] for f in s["flows"]] == [(4 << 20) + 16, (1 << 20) + 16]
        assert s["flows"][0]["rtt"]["method"] == "tsecr" and s["flows"][0]["rtt"]["n"] > 10
        assert s["capture"]["kernel_drops"] == 0


def test_unknown_congestion_control_is_refused_by_the_sender(tmp_path, sender):
    req = FetchRequest(server="127.0.0.1", port=sender, flows=[ProbeFlow(size_bytes=1000, cc="nosuchcc")])
    result = run_fetch(req, tmp_path, "badcc")
    assert result.status == "error" and result.returncode == 1
    assert "status 2 (unknown congestion control)" in result.summary["errors"][0]


def test_unreachable_server_gives_an_error_and_a_partial_summary(tmp_path):
    req = FetchRequest(server="127.0.0.1", port=free_port(), flows=[ProbeFlow(size_bytes=1 << 20)])
    result = run_fetch(req, tmp_path, "unreach")
    s = result.summary
    assert result.returncode == 1 and s["status"] == "error"
    assert "connect: Connection refused" in s["errors"][0] and f"127.0.0.1:{req.port}" in s["errors"][0]
    assert s["missing"] == ["flow 0: no measurements (0 bytes received)"]
    assert json.loads(result.summary_path.read_text())["status"] == "error"  # written, not only returned


def test_without_privileges_the_summary_says_what_is_missing(sender, require_root):
    # an unprivileged user cannot enter pytest's 0700 tmp tree: a world-writable dir of our own
    work = Path(tempfile.mkdtemp(prefix="cellab-probe-nopriv-"))
    work.chmod(0o777)
    summary = work / "nopriv.json"
    try:
        _run_unprivileged(sender, summary)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _run_unprivileged(sender: int, summary: Path) -> None:
    proc = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", str(PROBE), "fetch",
                           "--server", "127.0.0.1", "--port", str(sender), "--bytes", "2M", "--summary", str(summary)],
                          capture_output=True, text=True, timeout=30, check=False)
    s = json.loads(summary.read_text())
    assert proc.returncode == 0 or s["status"] == "partial"
    assert s["timestamps"] == "socket-coarse" and s["requests"][0]["complete"]
    assert any("CAP_NET_RAW" in m for m in s["missing"]) and any("per-packet RTT" in m for m in s["missing"])
    assert s["sr_estimate"]["regime"] == "undetermined"


def test_sigterm_writes_a_partial_summary(tmp_path, sender):
    summary = tmp_path / "term.json"
    proc = subprocess.Popen([str(PROBE), "fetch", "--server", "127.0.0.1", "--port", str(sender), "--seconds", "30",
                             "--summary", str(summary)], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    time.sleep(1.0)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(10) == 1
    s = json.loads(summary.read_text())
    assert s["interrupted"] and s["status"] == "partial" and "interrupted by signal 15" in s["errors"][0]
    assert s["requests"][0]["bytes_read"] > 0
