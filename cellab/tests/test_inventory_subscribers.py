"""`cellab validate lab.yaml` reads a core's `subscribers:` file as the core agent will provision it (through
the core room's check): a subscriber of another PLMN is refused naming the inventory's field and the row,
and never echoes K or OPc."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from cellab.bus.keys import generate_keypair
from cellab.testkit.helpers import run_cellab

ROOT = Path(__file__).resolve().parents[2]
LAB = ROOT / "runs" / "labs" / "srsran-zmq.yaml"
SECRET_K = "00112233445566778899aabbccddeeff"


def _lab(tmp_path: Path, subscribers: str) -> Path:
    data = yaml.safe_load(LAB.read_text())
    for name in ["controller", *(a["name"] for a in data["agents"])]:
        generate_keypair(tmp_path / "keys", name)
    enb, core = data["devices"]["enb"][0], data["devices"]["core"][0]
    enb["profile"] = str(ROOT / "ran-config" / "examples" / "zmq-25prb.yaml")
    core["profile"] = str(ROOT / "core-config" / "examples" / "srsran-zmq.yaml")
    (tmp_path / "subscribers.csv").write_text(subscribers)
    core["subscribers"] = "subscribers.csv"
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_the_example_subscribers_validate(tmp_path):
    shutil.copy(ROOT / "core-config" / "examples" / "subscribers-srsran-zmq.csv", tmp_path / "given.csv")
    done = run_cellab("validate", str(_lab(tmp_path, (tmp_path / "given.csv").read_text())))
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(("imsi", "apn", "says"), [
    ("310260123456780", "srsapn", ["row 1.imsi", "PLMN 00101"]),  # another PLMN
    ("001010123456780", "internet", ["row 1.apn", "APN internet", "srsapn"]),  # srsEPC serves its one APN only
])
def test_a_subscriber_the_core_would_not_serve_is_refused_naming_the_row(tmp_path, imsi, apn, says):
    text = ("name,imsi,k,opc,amf,apn,static_ip,sqn,qci\n"
            f"ue1,{imsi},{SECRET_K},63bfa50ee6523365ff14c1f45f88737d,8000,{apn},,4660,9\n")
    done = run_cellab("validate", str(_lab(tmp_path, text)))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and "devices.core[0].subscribers" in said and all(s in said for s in says), said
    assert SECRET_K not in said and "Traceback" not in said
