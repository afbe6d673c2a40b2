"""The srsran-zmq lab: its parameters, UEs and srsue config without srsRAN; with the bundle (../shared/tools/srsran,
root): one 2-UE campaign through `cellab run` (one bring-up serves every check, the suite's time budget): both UEs
carrying traffic with the RRC ground truth and the noise floor, the ZMQ broker and then srsenb SIGKILLed mid-run
(that run fails naming it, the next restarts the stack and passes).

The lab takes /tmp/cellab-srsran.lock itself from up() to down() (so `cellab run` in a subprocess holds it);
these tests first wait for it (and skip, saying so, when another stack keeps it), then let go for the run.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from cellab.ran.srsue_proc import SrsueProcess, UeSettings, render_ue_conf, ue_usim, write_ue_telemetry
from cellab.ran.uhd_args import SAMPLE_RATE_HZ
from cellab.ran.zmqlab import SrsranZmqLab, ZmqLabParams, srsran_bin_dir, subscribers_csv, validate_params

from cellab.errors import CellabError
from cellab.testkit.helpers import pid_in_netns

BUNDLE_BIN = Path(__file__).resolve().parents[2].parent / "shared" / "tools" / "srsran" / "bin"
LOCK_WAIT_S = 900.0


# ---- without srsRAN ------------------------------------------------------------------------------
@pytest.mark.parametrize(("field", "value", "allowed"), [
    ("n_prb", 30, "6, 15, 25, 50"), ("n_prb", 100, "6, 15, 25, 50"), ("sr_period_ms", 7, "5, 10, 20, 40, 80"),
    ("cqi_period_ms", 3, "160"), ("attenuation_db", 26, "25"), ("attenuation_db", -1, "0"),
    ("rlc_queue", 65536, "the real srsenb's RLC queue is fixed"), ("rlc_queue", "big", "allowed: 'srsenb'"),
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
    p = validate_params({"cc": "cubic", "receiver": "exll", "sr_period_ms": 40, "ues": 2, "rlc_queue": "srsenb"})
    assert p == ZmqLabParams(sr_period_ms=40)
    assert (p.n_prb, p.cqi_period_ms, p.attenuation_db) == (25, 40, 0.0)


def test_ue_conf_has_a_fixed_noise_floor_and_its_metrics(tmp_path):
    conf = render_ue_conf(UeSettings(), "x-ue0", tmp_path / "ue.log")
    assert "netns = x-ue0" in conf and "device_name = zmq" in conf
    assert "[channel.dl.awgn]\nenable = true\nsnr = -37\n" in conf  # 30 dB SNR at 0 dB attenuation
    assert f"metrics_csv_filename = {tmp_path / 'srsue_metrics.csv'}" in conf
    # RRC at info for its events (ue_events.py), without the hex dumps of the session keys it derives (k_rrc_enc,
    # k_rrc_int, k_up_enc: seen in the run folders' srsue.log at the default hex limit)
    assert "\nrrc_level = info\nrrc_hex_limit = 0\n" in conf


def test_missing_binaries_name_the_paths_searched(monkeypatch, tmp_path):
    monkeypatch.setenv("CELLAB_SRSRAN_BIN", str(tmp_path))
    monkeypatch.setattr("cellab.ran.zmqlab_params.BUNDLE_BIN", tmp_path / "nowhere")
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


class _Rates:
    """The broker's stats lines, as the lab reads them."""

    def __init__(self, msps: list[float]):
        self.lines = [{"t_s": 2.0 * (i + 1), "dl_msps": m} for i, m in enumerate(msps)]

    def rates(self) -> list[dict]:
        return self.lines


def test_the_stacks_tti_on_the_wall_clock_comes_from_the_brokers_first_line_after_configure(tmp_path, monkeypatch):
    import cellab.ran.zmqlab_run as zmqlab

    monkeypatch.setattr(zmqlab, "STATS_PERIOD_S", 0.1)  # the wait for a line, short
    lab = SrsranZmqLab(prefix="zqu", bin_dir=tmp_path)
    assert lab.stack_tti_ms() is None  # nothing configured: no stream to measure
    lab._applied = ZmqLabParams(n_prb=6)
    nominal = SAMPLE_RATE_HZ[6] / 1e6
    lab._broker = _Rates([0.1 * nominal, 0.4 * nominal, 0.6 * nominal, 0.7 * nominal])  # attach, then idle
    lab._broker_t_at = 4.0  # the second line's
    assert lab.stack_tti_ms() == pytest.approx(1 / 0.6, rel=1e-3)  # the idle stream's first line, not the attach's
    lab._broker_t_at = 8.0
    assert lab.stack_tti_ms() is None  # no line within the wait
    lab._broker, lab._broker_t_at = _Rates([1.01 * nominal]), -1.0
    assert lab.stack_tti_ms() is None  # real time: the probe keeps its own ruler
    lab._broker = _Rates([0.01 * nominal])
    assert lab.stack_tti_ms() == 20.0  # the probe's bound


def test_several_ues_each_with_namespace_address_usim_and_subscriber_row(tmp_path):
    lab = SrsranZmqLab(prefix="zqu", bin_dir=tmp_path, ues=3)
    assert [(h.name, h.netns, h.address) for h in lab.topology().ues] == [
        ("ue0", "zqu-ue0", "172.16.0.2"), ("ue1", "zqu-ue1", "172.16.0.3"), ("ue2", "zqu-ue2", "172.16.0.4")]
    usims = [ue_usim(i) for i in range(3)]
    assert len({u["imsi"] for u in usims}) == len({u["k"] for u in usims}) == len({u["imei"] for u in usims}) == 3
    rows = subscribers_csv(3).splitlines()[1:]
    assert [r.split(",")[1] for r in rows] == [u["imsi"] for u in usims]
    assert [r.split(",")[6] for r in rows] == ["172.16.0.2", "172.16.0.3", "172.16.0.4"]
    conf = render_ue_conf(UeSettings(base_srate_hz=5.76e6), "zqu-ue1", tmp_path / "ue.log", rx_port=2102,
                          tx_port=2103, index=1)
    assert "tx_port=tcp://*:2103,rx_port=tcp://localhost:2102,id=ue1,base_srate=5.76e6" in conf
    assert f"imsi = {usims[1]['imsi']}" in conf and f"k = {usims[1]['k']}" in conf
    profile = lab._enb_profile_yaml(15)  # the eNB's ZMQ stream at the cell's rate, as the UEs'
    assert "base_srate_hz: 3840000.0" in profile


@pytest.mark.parametrize("ues", [0, 5, True, "2"])
def test_a_ue_count_out_of_range_is_refused_naming_it(tmp_path, ues):
    with pytest.raises(CellabError) as err:
        SrsranZmqLab(prefix="zqu", bin_dir=tmp_path, ues=ues)
    assert "ues" in str(err.value) and "1..4" in str(err.value)


def test_srsue_metrics_become_the_runs_telemetry_of_that_ue(tmp_path):
    ue = SrsueProcess(tmp_path / "srsue", tmp_path, UeSettings(), netns=None, ue_netns="x-ue1", index=1)
    ue.metrics.write_text("time;cc;rsrp;dl_snr;dl_brate;is_attached\n1000;0;60;30;0;0\n2000;0;60;30;5e6;1\n"
                          "3000;0;50;20;7e6;1\n4000;0;50\n")
    ue.console.write_text("Random Access Complete.     c-rnti=0x47, ta=0\n")
    end_s = ue.metrics.stat().st_mtime
    path = write_ue_telemetry(ue, "ue1", since_s=end_s - 1.5, folder=tmp_path / "telemetry")
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert path.name == "ue1.jsonl" and len(rows) == 2  # the run's window; the row cut short is left out
    assert rows[0] == {"t_s": pytest.approx(end_s - 1.0), "topic": "srsue_metrics", "ue": "ue1", "rnti": 0x47,
                       "rsrp": 60.0, "dl_snr_db": 30.0, "dl_bitrate_bps": 5e6, "attached": 1.0}
    assert rows[1]["dl_snr_db"] == 20.0


# ---- with the bundle -----------------------------------------------------------------------------


def _runs(folder: Path) -> list[tuple[str, str, str | None]]:
    with sqlite3.connect(folder / "results.sqlite") as db:
        return list(db.execute("SELECT run_id, status, error FROM runs ORDER BY idx, repeat"))


def _no_leftovers(prefix: str) -> None:
    left = [n for n in os.listdir("/run/netns") if n.startswith(prefix + "-")] if os.path.isdir("/run/netns") else []
    assert not left, f"namespaces left behind: {left}"


def _killer(out: Path, prefix: str, victims: dict[int, str], killed: dict[int, int], stop: threading.Event) -> None:
    """Run n (1-based) of `victims`: once its folder exists and iperf3 runs in UE 0's namespace, 1 s into the
    workload, SIGKILL the named process of the stack's namespace."""
    while not stop.is_set() and len(killed) < len(victims):
        runs = sorted((p for p in out.glob("*/runs/*") if p.is_dir()), key=lambda p: p.stat().st_mtime)
        n = len(runs)
        if n in victims and n not in killed and pid_in_netns(f"{prefix}-ue0", "iperf3"):
            time.sleep(1.0)
            pid = pid_in_netns(f"{prefix}-core", victims[n])
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed[n] = pid
        time.sleep(0.2)


@pytest.mark.root
@pytest.mark.extended  # two minutes of srsRAN; make test brings the lab up in test_sr_receptions_zmq.py
@pytest.mark.timeout(LOCK_WAIT_S + 600)  # the srsRAN lock may be held by another stack for minutes; the run ~150 s
def test_two_ues_carry_traffic_and_broker_or_srsenb_killed_fail_that_run_only(bundle, tmp_path):
    """One bring-up, five runs: 1 both UEs' iperf3 at once (RRC ground truth, the noise floor at 10 dB, both UEs
    in the telemetry); 2 the broker killed; 3 passes on a fresh broker; 4 srsenb killed; 5 passes again."""
    prefix, out = "zqm", tmp_path / "out"
    camp = tmp_path / "camp.yaml"
    camp.write_text("name: zmq-2ue\nlab: srsran-zmq\nrepeat: 5\n"
                    "fixed: {n_prb: 25, cc: cubic, ues: 2, sr_period_ms: 40, attenuation_db: 10, rlc_queue: srsenb}\n"
                    "workload: {tool: iperf3, duration_s: 3}\n"
                    "timeouts: {run_s: 120, request_s: 6}\nretry: {max_attempts: 1, backoff_s: 0, min_stack_speed: null}\n")
    killed: dict[int, int] = {}
    stop = threading.Event()
    thread = threading.Thread(target=_killer, args=(out, prefix, {2: "cellab-zmq-broker", 4: "srsenb"}, killed,
                                                    stop), daemon=True)
    thread.start()
    env = os.environ | {"CELLAB_SRSRAN_BIN": str(bundle), "CELLAB_SRSRAN_LOCK_TIMEOUT_S": "60"}
    try:
        proc = subprocess.run([sys.executable, "-m", "cellab", "run", str(camp), "--out", str(out), "--prefix",
                               prefix, "--no-report"], capture_output=True, text=True, timeout=600, env=env)
    finally:
        stop.set()
        thread.join(5)
    log = proc.stdout[-3000:] + proc.stderr[-3000:]
    [folder] = sorted(out.iterdir())
    runs = _runs(folder)
    assert sorted(killed) == [2, 4], f"killed {killed}: " + log
    assert [status for _, status, _ in runs] == ["ok", "failed", "ok", "failed", "ok"], (runs, log)
    assert "ZMQ broker exited" in runs[1][2], runs[1][2]
    assert "srsenb" in runs[3][2], runs[3][2]

    # run 1: both UEs carried traffic at once, each named in the telemetry, the eNB saw both
    run_dir = folder / "runs" / runs[0][0]
    rates = {ue: json.loads((run_dir / "ues" / ue / "metrics.json").read_text())["throughput_bps"] / 1e6
             for ue in ("ue0", "ue1")}
    status = json.loads((run_dir / "lab_status.json").read_text())
    # over ZMQ the stack runs in slow motion when the host cannot keep up (the broker moves fewer samples than
    # 5.76 Msps a second): then the rates are the host's, and only that both UEs carried traffic is asserted
    speed = statistics.mean(r["dl_msps"] for r in status["broker"]["rates"]) / (SAMPLE_RATE_HZ[25] / 1e6)
    assert all(r > (2.0 if speed >= 0.9 else 0.25) for r in rates.values()), (rates, f"stack speed {speed:.2f}")
    tele = {ue: [json.loads(x) for x in (run_dir / "telemetry" / f"{ue}.jsonl").read_text().splitlines()]
            for ue in ("ue0", "ue1")}
    rntis = {ue: {row["rnti"] for row in rows} for ue, rows in tele.items()}
    assert all(len(r) == 1 and None not in r for r in rntis.values()) and rntis["ue0"] != rntis["ue1"], rntis
    enb_rntis = {json.loads(x)["rnti"] for x in (run_dir / "telemetry" / "enb.jsonl").read_text().splitlines()
                 if json.loads(x).get("topic") == "ue_metrics"}
    assert rntis["ue0"] | rntis["ue1"] <= enb_rntis, (rntis, enb_rntis)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    truth = manifest["ground_truth"]  # srsenb gives each UE its own SR offset; the period is the run's
    assert (truth["sr_period_ms"], truth["source"]) == (40, "rrc") and 35 <= truth["sr_config_index"] <= 74, truth
    assert truth["sr_config_index"] - 35 == truth["sr_offset_ms"], truth  # TS 36.213 Table 10.1.5-1
    # attenuation 10 dB: cell_gain -10 against srsue's noise floor (30 dB SNR, RSRP 60 at 0 dB): both drop 10 dB
    for ue, rows in tele.items():
        last = rows[-1]
        assert abs(last["rsrp"] - 50) <= 3 and abs(last["dl_snr_db"] - 20) <= 3, (ue, last)
    assert status["broker"]["running"] and status["core"]["ok"], status
    print(f"run 1 per UE Mbit/s {rates} at stack speed {speed:.2f}, attach {status['configure']['attach_s']:.1f} s, broker "
          f"{status['broker']['rates'][-1]}")

    # runs 3 and 5: the stack restarted for what broke, both UEs attached again
    for (run_id, _, _), cause in ((runs[2], "ZMQ broker not running"), (runs[4], "srsenb")):
        configure = json.loads((folder / "runs" / run_id / "lab_status.json").read_text())["configure"]
        assert configure["restarted"] and any(cause in r for r in configure["restart_reasons"]), configure
        print(f"restarted for {configure['restart_reasons']} in {configure['configure_s']:.1f} s: "
              f"{configure['steps_s']}, attach {configure['attach_s']:.1f} s")
    # run 5, after srsenb's restart: its eNB telemetry holds no sample from before its workload (each sample is
    # filed by its own time, srsenb's reports arrive seconds late)
    manifest = json.loads((folder / "runs" / runs[4][0] / "manifest.json").read_text())
    enb_rows = [json.loads(x) for x in (folder / "runs" / runs[4][0] / "telemetry" / "enb.jsonl").read_text()
                .splitlines()]
    assert enb_rows and all(r["t_s"] >= manifest["workload_started_at"] for r in enb_rows if r.get("t_s")), (
        manifest["workload_started_at"], [r.get("t_s") for r in enb_rows[:5]])
    print(f"run 2: {runs[1][2]}\nrun 4: {runs[3][2]}")
    _no_leftovers(prefix)
