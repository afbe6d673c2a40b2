"""The srsran-zmq lab: its parameters and srsue config without srsRAN; with the bundle (../shared/tools/srsran,
root): a 1-run SR campaign end to end through `cellab run`, and srsenb SIGKILLed mid-run.

The lab takes /tmp/cellab-srsran.lock itself from up() to down() (so `cellab run` in a subprocess holds it);
these tests first wait for it (and skip, saying so, when another stack keeps it), then let go for the run.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from cellab.ran.srsue_proc import UeSettings, render_ue_conf
from cellab.hostlock import SRSRAN_LOCK, host_lock
from cellab.ran.zmqlab import SrsranZmqLab, ZmqLabParams, srsran_bin_dir, validate_params
from cellab.errors import CellabError

BUNDLE_BIN = Path(__file__).resolve().parents[2].parent / "shared" / "tools" / "srsran" / "bin"
LOCK_WAIT_S = 900.0


# ---- without srsRAN ------------------------------------------------------------------------------
@pytest.mark.parametrize(("field", "value", "allowed"), [
    ("n_prb", 30, "6, 15, 25, 50"), ("n_prb", 100, "6, 15, 25, 50"), ("sr_period_ms", 7, "5, 10, 20, 40, 80"),
    ("cqi_period_ms", 3, "160"), ("attenuation_db", 26, "25"), ("attenuation_db", -1, "0"),
])
def test_bad_run_parameters_are_refused_naming_the_field(field, value, allowed):
    with pytest.raises(CellabError) as err:
        validate_params({field: value}, "camp.yaml")
    text = str(err.value)
    assert "camp.yaml" in text and field in text and allowed in text, text


def test_campaign_with_a_bad_value_fails_validation_naming_file_field_and_values(tmp_path):
    camp = tmp_path / "bad.yaml"
    camp.write_text("name: bad\nlab: srsran-zmq\nfactors: {sr_period_ms: [20, 7]}\nfixed: {n_prb: 25}\n"
                    "workload: {tool: probe, duration_s: 2}\n")
    proc = subprocess.run([sys.executable, "-m", "cellab", "validate", str(camp)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    out = proc.stdout + proc.stderr
    assert "bad.yaml" in out and "sr_period_ms" in out and "Traceback" not in out, out


def test_defaults_and_other_concerns_are_left_alone():
    p = validate_params({"cc": "cubic", "receiver": "exll", "sr_period_ms": 40})
    assert p == ZmqLabParams(sr_period_ms=40)
    assert (p.n_prb, p.cqi_period_ms, p.attenuation_db) == (25, 40, 0.0)


def test_ue_conf_has_a_fixed_noise_floor_and_its_metrics(tmp_path):
    conf = render_ue_conf(UeSettings(), "x-ue0", tmp_path / "ue.log")
    assert "netns = x-ue0" in conf and "device_name = zmq" in conf
    assert "[channel.dl.awgn]\nenable = true\nsnr = -37\n" in conf  # 30 dB SNR at 0 dB attenuation
    assert f"metrics_csv_filename = {tmp_path / 'srsue_metrics.csv'}" in conf


def test_missing_binaries_name_the_paths_searched(monkeypatch, tmp_path):
    monkeypatch.setenv("CELLAB_SRSRAN_BIN", str(tmp_path))
    monkeypatch.setattr("cellab.ran.zmqlab.BUNDLE_BIN", tmp_path / "nowhere")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(CellabError) as err:
        srsran_bin_dir()
    assert str(tmp_path) in str(err.value) and "nowhere" in str(err.value) and "PATH" in str(err.value)


def test_lab_kind_and_agents_it_asks_for(tmp_path):
    lab = SrsranZmqLab(prefix="zqu", bin_dir=tmp_path)
    specs = {s.name: s for s in lab.extra_agents()}
    assert (specs["enb"].role, specs["enb"].netns, specs["enb"].args) == ("enb", "zqu-core", ("--srsran-bin", str(tmp_path)))
    assert (specs["core"].role, specs["core"].kind) == ("core", "epc")
    topo = lab.topology()
    assert topo.server.netns == "zqu-srv" and topo.ues[0].netns == "zqu-ue0" and topo.ues[0].address == "172.16.0.2"


# ---- with the bundle -----------------------------------------------------------------------------
@pytest.fixture
def bundle() -> Path:
    folder = Path(os.environ.get("CELLAB_SRSRAN_BIN", BUNDLE_BIN))
    if not all((folder / p).is_file() for p in ("srsenb", "srsue", "srsepc")):
        pytest.skip(f"srsRAN bundle absent: no srsenb/srsue/srsepc in {folder} (../shared/tools/srsran, "
                    "or set CELLAB_SRSRAN_BIN)")
    if os.geteuid() != 0:
        pytest.skip("the srsran-zmq lab needs root (network namespaces, TUN devices)")
    with host_lock(SRSRAN_LOCK, LOCK_WAIT_S, "srsran-zmq test"):  # another stack finishes first; the lab
        pass                                                       # takes the lock itself
    return folder


def _campaign(tmp_path: Path, body: str) -> Path:
    camp = tmp_path / "camp.yaml"
    camp.write_text("lab: srsran-zmq\nfixed: {n_prb: 25, cc: cubic}\n" + body)
    return camp


def _run(camp: Path, out: Path, prefix: str, bundle: Path, timeout_s: float) -> tuple[subprocess.CompletedProcess, Path]:
    env = os.environ | {"CELLAB_SRSRAN_BIN": str(bundle), "CELLAB_SRSRAN_LOCK_TIMEOUT_S": "60"}
    proc = subprocess.run([sys.executable, "-m", "cellab", "run", str(camp), "--out", str(out), "--prefix", prefix,
                           "--no-report"], capture_output=True, text=True, timeout=timeout_s, env=env)
    folders = sorted(out.iterdir())
    assert folders, proc.stdout + proc.stderr
    return proc, folders[-1]


def _runs(folder: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(folder / "results.sqlite") as db:
        return list(db.execute("SELECT run_id, status, error FROM runs ORDER BY idx, repeat"))


def _no_leftovers(prefix: str) -> None:
    left = [n for n in os.listdir("/run/netns") if n.startswith(prefix + "-")] if os.path.isdir("/run/netns") else []
    assert not left, f"namespaces left behind: {left}"


@pytest.mark.root
def test_one_sr_run_end_to_end_with_rrc_ground_truth(bundle, tmp_path):
    camp = _campaign(tmp_path, "name: zmq-e2e\nfactors: {sr_period_ms: [40], attenuation_db: [10]}\n"
                               "workload: {tool: probe, duration_s: 2, sr_probes: 30}\n"
                               "timeouts: {run_s: 150, request_s: 20}\nretry: {max_attempts: 1, backoff_s: 1}\n")
    proc, folder = _run(camp, tmp_path / "out", "zqe", bundle, 400)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    [(run_id, status, error)] = _runs(folder)
    assert status == "ok", error
    run_dir = folder / "runs" / run_id
    manifest = json.loads((run_dir / "manifest.json").read_text())
    assert manifest["ground_truth"] == {"sr_period_ms": 40, "sr_offset_ms": 0, "sr_config_index": 35, "source": "rrc"}
    assert manifest["lab"]["kind"] == "srsran-zmq"
    metrics = json.loads((run_dir / "metrics.json").read_text())
    assert metrics["sr_true_ms"] == 40 and metrics["probe_status"] == "ok" and metrics["bytes_received"] > 0
    print(f"SR estimate {metrics.get('sr_estimate_ms')} ms (true 40), rtt min {metrics['rtt_min_ms']:.1f} ms")
    console = (run_dir / "srsue_console.log").read_text()
    status_ = json.loads((run_dir / "lab_status.json").read_text())
    assert status_["enb"]["state"] == "running" and status_["enb"]["connected_rntis"]
    assert status_["core"]["ok"], status_["core"]["problems"]
    assert "Network attach successful" in console or status_["configure"]["restarted"]
    assert (run_dir / "enb_metrics.jsonl").stat().st_size > 0  # the eNB agent's telemetry, per UE
    # attenuation 10 dB: cell_gain -10 against srsue's noise floor (30 dB SNR, RSRP 60 at 0 dB): both drop 10 dB
    rows = [line.split(";") for line in (run_dir / "srsue_metrics.csv").read_text().splitlines()]
    header, last = rows[0], rows[-1]
    rsrp, snr = float(last[header.index("rsrp")]), float(last[header.index("dl_snr")])
    assert abs(rsrp - 50) <= 3 and abs(snr - 20) <= 3, (rsrp, snr)
    _no_leftovers("zqe")


def _srsenb_pid(prefix: str) -> int | None:
    pids = subprocess.run(["ip", "netns", "pids", f"{prefix}-core"], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == "srsenb":
                return int(pid)
        except OSError:
            continue
    return None


def _ue_routed(prefix: str) -> bool:
    out = subprocess.run(["ip", "netns", "exec", f"{prefix}-ue0", "ip", "route", "show", "default"],
                         capture_output=True, text=True).stdout
    return "tun_srsue" in out


@pytest.mark.root
def test_srsenb_killed_mid_run_fails_that_run_and_the_next_restarts_it(bundle, tmp_path):
    prefix = "zqk"
    camp = _campaign(tmp_path, "name: zmq-kill\nrepeat: 2\nfactors: {sr_period_ms: [20]}\n"
                               "workload: {tool: probe, duration_s: 5}\n"
                               "timeouts: {run_s: 120, request_s: 20}\nretry: {max_attempts: 1, backoff_s: 1}\n")
    killed: list[int] = []

    def killer() -> None:  # the first run's workload: the UE routed through tun_srsue, then 2 s into it
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and not killed:
            if _ue_routed(prefix):
                time.sleep(2.0)
                pid = _srsenb_pid(prefix)
                if pid:
                    os.kill(pid, signal.SIGKILL)
                    killed.append(pid)
                return
            time.sleep(0.2)

    thread = threading.Thread(target=killer, daemon=True)
    thread.start()
    proc, folder = _run(camp, tmp_path / "out", prefix, bundle, 500)
    thread.join(5)
    assert killed, "srsenb was never seen running in the lab: " + proc.stdout[-2000:] + proc.stderr[-2000:]
    (_, first, error), (second_id, second, error2) = _runs(folder)
    assert first == "failed" and "srsenb" in (error or ""), error
    assert second == "ok", error2
    configure = json.loads((folder / "runs" / second_id / "lab_status.json").read_text())["configure"]
    assert configure["restarted"] and any("srsenb" in r for r in configure["restart_reasons"]), configure
    print(f"run 1: {error}\nrun 2 restarted: {configure['restart_reasons']}")
    _no_leftovers(prefix)
