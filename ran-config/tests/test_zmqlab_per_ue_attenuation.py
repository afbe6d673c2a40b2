"""Per-UE attenuation on srsran-zmq, as on `virtual`: a run's `ues` list may give each UE its own `attenuation_db`;
the lab applies the least as the eNB's cell_gain and each UE's excess as its own downlink gain in the ZMQ broker
(dl_gain_db), both against srsue's fixed noise floor. Without srsRAN: the split and the broker's argv; with the
bundle (root): one 2-UE `cellab run`, 0 and 12 dB, whose UEs report RSRP and SNR 12 dB apart."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from cellab.ran.zmq_broker import broker_argv
from cellab.ran.zmqlab import SrsranZmqLab, validate_params

from cellab.errors import CellabError


def test_each_ue_gets_its_own_attenuation_or_the_runs(tmp_path):
    lab = SrsranZmqLab(prefix="zqa", bin_dir=tmp_path, ues=3)
    p = validate_params({"attenuation_db": 5})
    assert lab.ue_attenuations(p, 3) == [5.0, 5.0, 5.0]
    assert lab.ue_attenuations(p, [{"name": "a", "attenuation_db": 0}, {"name": "b"},
                                   {"name": "c", "attenuation_db": 12.5}]) == [0.0, 5.0, 12.5]
    with pytest.raises(CellabError) as err:
        lab.ue_attenuations(p, [{"attenuation_db": 30}])
    assert "ues[0].attenuation_db" in str(err.value) and "0..25" in str(err.value)
    argv = broker_argv(Path("/b"), 2, [0.0, -12.5])
    ues = [argv[i + 1] for i, a in enumerate(argv) if a == "--ue"]
    assert ues == ["rx=tcp://127.0.0.1:2100,tx=tcp://127.0.0.1:2101",
                   "rx=tcp://127.0.0.1:2102,tx=tcp://127.0.0.1:2103,dl_gain_db=-12.5"], ues


@pytest.mark.root
@pytest.mark.extended  # a minute of srsRAN with two UEs; the per-UE split itself is checked above without it
@pytest.mark.timeout(900 + 300)  # the srsRAN lock may be held by another stack for minutes; the run ~50 s
def test_two_ues_at_different_attenuations_see_their_own_signal(bundle, tmp_path):
    out, camp = tmp_path / "out", tmp_path / "camp.yaml"
    camp.write_text("name: zmq-per-ue\nlab: srsran-zmq\nrepeat: 1\n"
                    "fixed: {n_prb: 25, cc: cubic, sr_period_ms: 20,\n"
                    "        ues: [{name: near, attenuation_db: 0}, {name: far, attenuation_db: 12}]}\n"
                    "workload: {tool: iperf3, duration_s: 3}\n"
                    "timeouts: {run_s: 120, request_s: 6}\nretry: {max_attempts: 1, backoff_s: 0}\n")
    env = os.environ | {"CELLAB_SRSRAN_BIN": str(bundle), "CELLAB_SRSRAN_LOCK_TIMEOUT_S": "60"}
    proc = subprocess.run([sys.executable, "-m", "cellab", "run", str(camp), "--out", str(out), "--prefix", "zqa",
                           "--no-report"], capture_output=True, text=True, timeout=400, env=env)
    log = proc.stdout[-3000:] + proc.stderr[-3000:]
    [folder] = sorted(out.iterdir())
    with sqlite3.connect(folder / "results.sqlite") as db:
        [(run_id, status, error)] = list(db.execute("SELECT run_id, status, error FROM runs"))
    assert status == "ok", (error, log)
    run_dir = folder / "runs" / run_id
    configure = json.loads((run_dir / "lab_status.json").read_text())["configure"]
    assert configure["ue_attenuation_db"] == [0.0, 12.0] and configure["cell_gain_db"] == 0, configure
    assert configure["broker_dl_gain_db"] == [0.0, -12.0], configure
    last = {}
    for i in (0, 1):  # srsue's own report, UE i's telemetry (the lab's names ue0, ue1)
        rows = [json.loads(x) for x in (run_dir / "telemetry" / f"ue{i}.jsonl").read_text().splitlines()]
        last[i] = rows[-1]
    # 0 dB: RSRP ~60, SNR ~30 (the noise floor); 12 dB: both 12 dB lower
    assert abs(last[0]["rsrp"] - 60) <= 3 and abs(last[0]["dl_snr_db"] - 30) <= 3, last
    assert abs(last[1]["rsrp"] - 48) <= 3 and abs(last[1]["dl_snr_db"] - 18) <= 3, last
    assert 9 <= last[0]["rsrp"] - last[1]["rsrp"] <= 15 and 9 <= last[0]["dl_snr_db"] - last[1]["dl_snr_db"] <= 15
    print(f"near rsrp {last[0]['rsrp']:.1f} snr {last[0]['dl_snr_db']:.1f}; far rsrp {last[1]['rsrp']:.1f} "
          f"snr {last[1]['dl_snr_db']:.1f}")
