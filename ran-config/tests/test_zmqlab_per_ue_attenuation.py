"""Per-UE attenuation on srsran-zmq, as on `virtual`: a run's `ues` list may give each UE its own `attenuation_db`;
the lab applies the least as the eNB's cell_gain and each UE's excess as its own downlink gain in the ZMQ broker
(dl_gain_db), both against srsue's fixed noise floor; the lab's attenuator changes a UE's gain while the run goes
(schedules). Without srsRAN: the split, the broker's argv and the attenuator's control socket; with the bundle
(root): one 2-UE `cellab run`, 0 and 12 dB, whose UEs report RSRP and SNR 12 dB apart."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zmq
from cellab.labs.cellctl import CellControl, CellControlError
from cellab.ran.zmq_broker import broker_argv
from cellab.ran.zmqlab import SrsranZmqLab
from cellab.ran.zmqlab_attenuation import UL_REF_SNR_DB, AttenuationControl, ue_attenuations

from cellab.errors import CellabError

from .conftest import run_zmq_campaign


def test_each_ue_gets_its_own_attenuation_or_the_runs(tmp_path):
    assert ue_attenuations(5, 3, 3, 25) == [5.0, 5.0, 5.0]
    assert ue_attenuations(5, [{"name": "a", "attenuation_db": 0}, {"name": "b"},
                               {"name": "c", "attenuation_db": 12.5}], 3, 25) == [0.0, 5.0, 12.5]
    with pytest.raises(CellabError) as err:
        ue_attenuations(5, [{"attenuation_db": 30}], 3, 25)
    assert "ues[0].attenuation_db" in str(err.value) and "0..25" in str(err.value)
    argv = broker_argv(Path("/b"), 2, [0.0, -12.5])
    ues = [argv[i + 1] for i, a in enumerate(argv) if a == "--ue"]
    assert ues == ["rx=tcp://127.0.0.1:2100,tx=tcp://127.0.0.1:2101",
                   "rx=tcp://127.0.0.1:2102,tx=tcp://127.0.0.1:2103,dl_gain_db=-12.5"], ues


def test_the_labs_attenuator_sets_each_ues_broker_gain_against_the_cells(tmp_path):
    """What the attenuator bridge asks (the virtual cell's control protocol) becomes the broker's gain for that
    UE: the cell's attenuation (the eNB's cell_gain, shared) minus the UE's; a broken request changes nothing."""
    lab = SrsranZmqLab(prefix="zqa", bin_dir=tmp_path, ues=2)
    sent: list[tuple[int, float]] = []

    sent_ul: list[tuple[int, float]] = []

    class Broker:  # the lab's broker as set_ue_attenuation meets it (the real one: test_zmq_broker.py)
        dl_gains_db = [0.0, 0.0]
        ul_gains_db = [0.0, 0.0]

        def running(self) -> bool:
            return True

        def set_gain(self, ue: int, gain_db: float, link: str = "dl") -> None:
            if gain_db < -30:
                raise CellabError("ZMQ broker refused")
            (sent if link == "dl" else sent_ul).append((ue, gain_db))
            (self.dl_gains_db if link == "dl" else self.ul_gains_db)[ue] = gain_db

    endpoint = f"ipc://{tmp_path}/attenuation.ctl"
    control = AttenuationControl(endpoint, 2, lab.set_ue_attenuation, lambda ue: lab._ue_att_db[ue])
    ctl = CellControl(endpoint, 2000)
    try:
        lab.set_ue_attenuation(1, 12.0)  # before the broker runs: kept for its start
        assert sent == [] and lab._broker_gains_db() == [0.0, -12.0]
        lab._broker, lab._cell_att_db = Broker(), 5.0  # configure: cell_gain -5 dB
        assert ctl.set_attenuation(1, 20.0)["attenuation_db"] == 20.0
        assert ctl.set_attenuation(0, 0.0)["ok"] is True
        assert sent == [(1, -15.0), (0, 5.0)]
        assert sent_ul == [(1, -20.0)]  # the uplink takes all of a UE's attenuation (cell_gain is srsenb's tx's)
        assert ctl.get_attenuation(1)["attenuation_db"] == 20.0
        for ue, db, says in ((2, 10.0, "ue: 0..1"), (0, 61.0, "attenuation_db: 0..60 dB"),
                             (0, 40.0, "ZMQ broker refused")):
            with pytest.raises(CellControlError, match=says):
                ctl.set_attenuation(ue, db)
        sock = zmq.Context.instance().socket(zmq.REQ)
        sock.setsockopt(zmq.LINGER, 0)
        sock.setsockopt(zmq.RCVTIMEO, 2000)
        sock.connect(endpoint)
        for raw in (b"\xff\xfe", b"[1]", b'{"op": "rm -rf", "ue": 0}', b'{"op": "set_attenuation", "ue": true}'):
            sock.send(raw)
            assert json.loads(sock.recv())["ok"] is False, raw
        sock.close()
        assert sent == [(1, -15.0), (0, 5.0)] and lab._ue_att_db == [0.0, 20.0]
    finally:
        ctl.close()
        control.stop()


def test_a_ue_that_lost_the_cell_is_waited_for_until_srsue_logs_its_way_back(tmp_path, monkeypatch):
    """configure's safety net: a UE whose srsue logged a radio link failure since the last configure (the
    attenuator's safe state, a fault) counts as lost until its log shows the re-establishment; a UE that never
    lost the cell is not waited for."""
    from types import SimpleNamespace

    import cellab.ran.zmqlab_attenuation as radio
    from cellab.ran.ue_events import RrcEventTail

    lab = SrsranZmqLab(prefix="zqa", bin_dir=tmp_path, ues=2)
    logs = [tmp_path / "ue0.log", tmp_path / "ue1.log"]
    logs[0].write_text("2026-11-26T14:13:31.009128 [RRC    ] [I] Detected 1 out-of-sync from PHY. Trying to resync. "
                       "Starting T310 timer 200 ms\n2026-11-26T14:13:31.411743 [RRC    ] [I] Timer T310 expired: "
                       "Radio Link Failure\n")
    logs[1].write_text("2026-11-26T14:13:31.000000 [RRC    ] [I] MEAS:  New measurement serving cell\n")
    lab._ues = [SimpleNamespace(index=i, log=log, rrc=RrcEventTail(log, i)) for i, log in enumerate(logs)]
    lab._applied = object()
    lab._configured_at_s = 0.0
    assert lab._lost_ues() == [0]
    monkeypatch.setattr(radio, "RECONNECT_WAIT_S", 0.5)
    assert lab._wait_reconnected([0]) == [0]  # still out after the wait: configure restarts the radio
    with open(logs[0], "a") as log:
        log.write("2026-11-26T14:13:34.453147 [RRC    ] [I] SRB1 - Tx rrcConnectionReestablishmentComplete (2 B)\n")
    assert lab._wait_reconnected([0]) == [] and lab._lost_ues() == []


@pytest.mark.root
@pytest.mark.extended  # a minute of srsRAN with two UEs; the per-UE split itself is checked above without it
@pytest.mark.timeout(900 + 300)  # the srsRAN lock may be held by another stack for minutes; the run ~50 s
def test_two_ues_at_different_attenuations_see_their_own_signal(bundle, tmp_path):
    """UEs at 0 and 15 dB: each srsue's RSRP and SNR, and the SINR srsenb measures on each UE's PUSCH against its
    uplink noise floor, 15 dB apart (a shield box attenuates both directions)."""
    folder, runs, log = run_zmq_campaign(bundle, tmp_path, (
        "name: zmq-per-ue\nlab: srsran-zmq\nrepeat: 1\n"
        "fixed: {n_prb: 25, cc: cubic, sr_period_ms: 20,\n"
        "        ues: [{name: near, attenuation_db: 0}, {name: far, attenuation_db: 15}]}\n"
        "workload: {tool: iperf3, duration_s: 4}\n"
        "timeouts: {run_s: 120, request_s: 6}\n"
        "retry: {max_attempts: 1, backoff_s: 0, min_stack_speed: null}\n"), "zqa", 60)  # levels judged, not rates
    [(run_id, status, error, _)] = runs
    assert status == "ok", (error, log)
    run_dir = folder / "runs" / run_id
    configure = json.loads((run_dir / "lab_status.json").read_text())["configure"]
    assert configure["ue_attenuation_db"] == [0.0, 15.0] and configure["cell_gain_db"] == 0, configure
    assert configure["broker_dl_gain_db"] == [0.0, -15.0], configure
    assert configure["broker_ul_gain_db"] == [0.0, -15.0], configure
    last, rnti = {}, {}
    for i in (0, 1):  # srsue's own report, UE i's telemetry (the lab's names ue0, ue1)
        rows = [json.loads(x) for x in (run_dir / "telemetry" / f"ue{i}.jsonl").read_text().splitlines()]
        last[i], rnti[i] = rows[-1], rows[-1]["rnti"]
    # 0 dB: RSRP ~60, SNR ~30 (the noise floor); 15 dB: both 15 dB lower
    assert abs(last[0]["rsrp"] - 60) <= 3 and abs(last[0]["dl_snr_db"] - 30) <= 3, last
    assert abs(last[1]["rsrp"] - 45) <= 3 and abs(last[1]["dl_snr_db"] - 15) <= 3, last
    assert 12 <= last[0]["rsrp"] - last[1]["rsrp"] <= 18 and 12 <= last[0]["dl_snr_db"] - last[1]["dl_snr_db"] <= 18
    # the eNB's side: each UE's PUSCH SINR in srsenb's own report (the run's enb_metrics.jsonl, by C-RNTI)
    enb = [json.loads(x) for x in (run_dir / "enb_metrics.jsonl").read_text().splitlines()]
    ul = {i: [m["ul_snr_db"] for m in enb if m["rnti"] == rnti[i] and m.get("ul_snr_db")  # 0.0: no PUSCH then
              and m["t_s"] >= workload_start_s(run_dir)] for i in (0, 1)}
    ul_median = {i: sorted(v)[len(v) // 2] for i, v in ul.items() if v}  # a period cut by the workload's end: lower
    ul_mcs = {i: [round(m["ul_mcs"], 1) for m in enb if m["rnti"] == rnti[i] and m.get("ul_snr_db")
                  and m["t_s"] >= workload_start_s(run_dir)] for i in (0, 1)}
    print(f"near rsrp {last[0]['rsrp']:.1f} snr {last[0]['dl_snr_db']:.1f} ul_snr {ul[0][-6:]}; "
          f"far rsrp {last[1]['rsrp']:.1f} snr {last[1]['dl_snr_db']:.1f} ul_snr {ul[1][-6:]}; ul_mcs {ul_mcs}")
    assert len(ul_median) == 2, ul
    assert abs(ul_median[0] - UL_REF_SNR_DB) <= 3 and abs(ul_median[1] - (UL_REF_SNR_DB - 15)) <= 3, ul
    assert 12 <= ul_median[0] - ul_median[1] <= 18, ul


def workload_start_s(run_dir) -> float:
    """The run's workload start on the wall clock (srsenb's report before it is the attach's)."""
    return json.loads((run_dir / "manifest.json").read_text())["workload_started_at"]


@pytest.mark.root
@pytest.mark.extended  # a minute of srsRAN with two UEs; the attenuator's path to the broker is checked above
@pytest.mark.timeout(900 + 300)  # the srsRAN lock may be held by another stack for minutes; the run ~60 s
def test_a_schedule_on_one_ue_moves_its_signal_and_leaves_the_others(bundle, tmp_path):
    """A schedule played on UE `far` while the run goes (0 dB, 15 dB, back to 0): its own srsue reports RSRP
    15 dB lower in the middle and back at the end, with no restart; UE `near` keeps its signal throughout. The
    second run plays it again without restarting the radio."""
    (tmp_path / "walk.yaml").write_text(
        "channels: [2]\nupdate_interval_s: 0.5\nsegments:\n"  # UE far is on channel 2: the file moves only it
        "  - {kind: hold, db: 0, duration_s: 3}\n  - {kind: hold, db: 15, duration_s: 6}\n"
        "  - {kind: hold, db: 0, duration_s: 30}\n")
    folder, runs, log = run_zmq_campaign(bundle, tmp_path, (
        "name: zmq-per-ue-schedule\nlab: srsran-zmq\nrepeat: 2\n"
        "schedules: {walk: {file: walk.yaml}}\n"
        "fixed: {n_prb: 25, cc: cubic, sr_period_ms: 20,\n"
        "        ues: [{name: near}, {name: far, schedule: walk}]}\n"
        "workload: {tool: iperf3, duration_s: 14}\n"
        "timeouts: {run_s: 150, request_s: 20}\nretry: {max_attempts: 1, backoff_s: 0, "
        "min_stack_speed: null}\n"), "zqs", 60)  # the signal's levels are what is judged, not rates
    assert [status for _, status, *_ in runs] == ["ok", "ok"], (runs, log)
    second = json.loads((folder / "runs" / runs[1][0] / "lab_status.json").read_text())["configure"]
    assert second["restarted"] is False, second
    run_dir = folder / "runs" / runs[0][0]
    configure = json.loads((run_dir / "lab_status.json").read_text())["configure"]
    assert configure["broker_dl_gain_db"] == [0.0, 0.0], configure
    rsrp = {i: [json.loads(x)["rsrp"] for x in (run_dir / "telemetry" / f"ue{i}.jsonl").read_text().splitlines()]
            for i in (0, 1)}
    near, far = rsrp[0], rsrp[1]
    assert len(far) >= 8, far
    # 0 dB: RSRP ~60; 15 dB: ~45, and back
    assert abs(max(far) - 60) <= 3 and abs(min(far) - 45) <= 3, far
    assert abs(far[-1] - 60) <= 3, far
    assert max(near) - min(near) <= 4 and abs(sum(near) / len(near) - 60) <= 3, near
    print(f"far RSRP {far}; near RSRP {near}")
