"""The example inventories in runs/labs validate: references, profile contents, and every eNB agreeing with
every core on PLMN, TAC and MME address (read by the RAN and core rooms); a mismatch names both files."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cellab.bus.keys import generate_keypair
from cellab.testkit.helpers import run_cellab

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = sorted((ROOT / "runs" / "labs").glob("*.yaml"))
INVENTORIES = [p for p in EXAMPLES if "controller:" in p.read_text()]


@pytest.fixture
def tree(tmp_path) -> Path:
    """The examples and the profiles they name, at the same relative places, with key pairs made."""
    for folder in ("runs/labs", "ran-config/examples", "core-config/examples"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    for name in ("controller", "enb1", "core1", "server1", "phone1", "phone2", "atten1"):
        generate_keypair(tmp_path / "runs" / "labs" / "keys", name)
    return tmp_path / "runs" / "labs"


def test_there_are_the_three_example_labs():
    assert {p.name for p in INVENTORIES} == {"b210-open5gs.yaml", "x310-nextepc.yaml", "srsran-zmq.yaml"}


@pytest.mark.parametrize("inventory", INVENTORIES, ids=lambda p: p.name)
def test_each_example_lab_validates(tree, inventory):
    result = run_cellab("validate", str(tree / inventory.name))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "ok" in result.stdout and "lab inventory" in result.stdout


def test_an_enb_and_a_core_that_disagree_are_named_with_both_files(tree):
    core = tree / "open5gs-core.yaml"
    core.write_text(core.read_text().replace("tacs: [1]", "tacs: [9]").replace('mcc: "001"', 'mcc: "002"'))
    result = run_cellab("validate", str(tree / "b210-open5gs.yaml"))
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    text = " ".join(result.stderr.split())
    assert "PLMN 001-01" in text and "002-01" in text and "b210-25prb.yaml" in text and "open5gs-core.yaml" in text
    assert "TAC 1" in text and "[9]" in text


def test_the_server_address_is_the_edge_host_s_not_the_core_s_ue_gateway(tree):
    # b210-open5gs once gave its edge server the UPF's ogstun address (10.45.0.1, on the core host) and validated
    lab = tree / "b210-open5gs.yaml"
    lab.write_text(lab.read_text().replace("address: 192.168.10.5, modules", "address: 10.45.0.1, modules"))
    result = run_cellab("validate", str(lab))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    text = " ".join(result.stderr.split())
    assert "devices.servers[0].address: 10.45.0.1 is the gateway of core open5gs's UE subnet 10.45.0.0/16" in text
