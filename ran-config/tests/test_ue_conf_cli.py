"""`cellab ran ue-conf PROFILE`: the srsue an inventory's ZMQ eNB needs, started by hand (runs/labs/srsran-zmq.yaml):
srsue binds the port srsenb receives on and connects to the one it sends on, at the profile's ZMQ rate and EARFCN,
with the USIM of the example subscriber row and its TUN in the named namespace. A UHD profile is refused."""

from __future__ import annotations

import csv
from pathlib import Path

from cellab.testkit.helpers import run_cellab

ROOT = Path(__file__).resolve().parents[2]
PROFILE = ROOT / "ran-config" / "examples" / "zmq-25prb.yaml"


def test_ue_conf_matches_the_zmq_enb_profile_and_the_example_subscriber(tmp_path):
    out = tmp_path / "ue.conf"
    done = run_cellab("ran", "ue-conf", str(PROFILE), "--netns", "ue1", "--out", str(out))
    assert done.returncode == 0, done.stdout + done.stderr
    text = out.read_text()
    assert "device_args = tx_port=tcp://*:2001,rx_port=tcp://localhost:2000,id=ue0,base_srate=23.04e6" in text
    assert "dl_earfcn = 3350" in text and "netns = ue1" in text
    rows = [r for r in csv.DictReader(line for line in (ROOT / "core-config" / "examples" /
                                                          "subscribers-srsran-zmq.csv").open() if not line.startswith("#"))]
    ue1 = next(r for r in rows if r["name"] == "ue1")
    for key in ("imsi", "k", "opc"):
        assert f"{key} = {ue1[key]}" in text  # the core knows this SIM


def test_ue_conf_refuses_a_radio_that_is_not_zmq(tmp_path):
    done = run_cellab("ran", "ue-conf", str(ROOT / "ran-config" / "examples" / "b210-25prb.yaml"), "--netns", "ue1",
                      "--out", str(tmp_path / "ue.conf"))
    assert done.returncode == 2 and "rf.device is uhd, not zmq" in done.stderr
    assert not (tmp_path / "ue.conf").exists()
