"""File names in a campaign or an inventory with a NUL byte, a part longer than 255 bytes or a whole longer than
4095 bytes: each ends in one InputError naming the file and the field (and `cellab validate` exits without a
traceback), where pathlib raised ValueError ('embedded null byte') or OSError (ENAMETOOLONG) before."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from cellab.bus.keys import generate_keypair
from cellab.campaign.load import load_campaign
from cellab.errors import InputError, InputErrors
from cellab.inputs import read_text
from cellab.inventory.model import load_inventory
from cellab.testkit.helpers import run_cellab

ROOT = Path(__file__).resolve().parents[2]
NUL = "x\0y.down"
LONG_PART = "a" * 300 + ".down"
LONG_PATH = "/".join(["abcdefgh"] * 600) + ".down"
SURROGATE = "x\ud800.down"  # YAML's "\ud800" escape: no file name can hold it
NAMES = {"nul": NUL, "long-part": LONG_PART, "long-path": LONG_PATH, "surrogate": SURROGATE}


def campaign(tmp_path: Path, **extra: object) -> Path:
    data = {"name": "c", "lab": "virtual", "workload": {"tool": "probe", "duration_s": 5}} | extra
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=False))  # a NUL is written as the escape "\0"
    return path


def where(name: str) -> dict[str, dict]:
    """A file name at each place of a campaign that names a file."""
    return {
        "fixed.trace": {"fixed": {"trace": name}},
        "fixed.trace_up": {"fixed": {"trace_up": name}},
        "factors.trace[1]": {"factors": {"trace": [str(ROOT / "runs/data/sample-commercial.down"), name]}},
        "factors.b.x.trace": {"factors": {"b": {"x": {"trace": name}}}},
        "fixed.clock_file": {"fixed": {"clock_file": name}},
        "schedules.s.file": {"schedules": {"s": {"file": name}}},
        "schedules.s.drive_log": {"schedules": {"s": {"drive_log": name}}},
        "lab": {"lab": name.replace(".down", ".yaml")},
    }


CASES = [(kind, field, change) for kind, name in NAMES.items() for field, change in where(name).items()]


@pytest.mark.parametrize("kind, field, change", CASES, ids=[f"{c[0]}-{c[1]}" for c in CASES])
def test_a_bad_file_name_in_a_campaign_is_an_input_error(tmp_path, kind, field, change):
    with pytest.raises((InputError, InputErrors)) as info:
        load_campaign(campaign(tmp_path, **change))
    message = str(info.value)
    assert "c.yaml" in message and field in message, message
    assert "\0" not in message


def test_a_nul_anywhere_in_a_campaign_is_refused(tmp_path):
    with pytest.raises(InputError, match=r"c\.yaml: workload\.tool: has a NUL byte"):
        load_campaign(campaign(tmp_path, workload={"tool": "pro\0be", "duration_s": 5}))


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_validate_says_it_without_a_traceback(tmp_path, kind):
    result = run_cellab("validate", str(campaign(tmp_path, fixed={"trace": NAMES[kind]})))
    assert result.returncode != 0 and "Traceback" not in result.stdout + result.stderr
    assert "fixed.trace" in result.stdout + result.stderr


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_the_cli_lab_option_is_checked_too(tmp_path, kind):
    with pytest.raises((InputError, InputErrors)) as info:
        load_campaign(campaign(tmp_path), lab=NAMES[kind].replace(".down", ".yaml"))
    assert "lab" in str(info.value)


@pytest.mark.parametrize("kind", sorted(NAMES))
def test_a_reader_given_a_bad_name_says_so(kind):
    with pytest.raises(InputError, match="the file name"):
        read_text(NAMES[kind])


# ------------------------------------------------------------------ inventories
@pytest.fixture
def inventory(tmp_path) -> dict:
    for name in ("controller", "enb1", "core1", "server1", "phone1"):
        generate_keypair(tmp_path / "keys", name)
    shutil.copy(ROOT / "ran-config/examples/zmq-25prb.yaml", tmp_path / "enb.yaml")
    data = yaml.safe_load((ROOT / "runs/labs/srsran-zmq.yaml").read_text())
    data["devices"]["enb"][0]["profile"] = "enb.yaml"
    data["devices"]["core"][0]["profile"] = str(ROOT / "core-config/examples/srsran-zmq.yaml")
    data["devices"]["core"][0]["subscribers"] = str(ROOT / "core-config/examples/subscribers-srsran-zmq.csv")
    return data


INVENTORY_FIELDS = [("controller", "secret_key"), ("agents", "public_key"), ("enb", "profile"),
                    ("core", "profile"), ("core", "subscribers")]


@pytest.mark.parametrize("kind", sorted(NAMES))
@pytest.mark.parametrize("group, key", INVENTORY_FIELDS)
def test_a_bad_file_name_in_an_inventory_is_an_input_error(tmp_path, inventory, kind, group, key):
    if group == "controller":
        inventory["controller"][key] = NAMES[kind]
    elif group == "agents":
        inventory["agents"][2][key] = NAMES[kind]
    else:
        inventory["devices"][group][0][key] = NAMES[kind]
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(inventory))
    with pytest.raises((InputError, InputErrors)) as info:
        load_inventory(path)
    message = str(info.value)
    assert "lab.yaml" in message and key in message and "\0" not in message, message


def test_the_good_inventory_loads(tmp_path, inventory):
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(inventory))
    assert load_inventory(path).devices.enb[0].profile == tmp_path / "enb.yaml"
