"""Issue 27, names: one rule (cellab.inputs.name_problem) for every name a person writes — factor and level
names, UE names, inventory entries, attenuators, agents and key files. A zero-width, bidirectional-control or
Cyrillic look-alike character is refused naming the file, the field and the character by its code point;
before, level names, factor names, attenuator names and key names took them."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
import yaml

from cellab.bus.keys import generate_keypair
from cellab.bus.names import check_name as agent_name
from cellab.bus.names import is_name
from cellab.campaign.load import load_campaign
from cellab.errors import InputError, InputErrors
from cellab.inventory.model import load_inventory
from cellab.testkit.helpers import cellab_in_process, write_lab

HOSTILE = {
    "zero-width": ("cu\u200bbic", "U+200B ZERO WIDTH SPACE"),
    "bidi": ("cu\u202ebic", "U+202E RIGHT-TO-LEFT OVERRIDE"),
    "homoglyph": ("cubic\u0430", "U+0430 CYRILLIC SMALL LETTER A"),  # Cyrillic 'а' after Latin letters
    "newline": ("cubic\n", "U+000A"),
}
CAMPAIGN = {"name": "names", "lab": "virtual", "fixed": {"n_prb": 25},
            "workload": {"tool": "iperf3", "duration_s": 2}}


def _refused(load, path: Path) -> str:
    with pytest.raises((InputError, InputErrors)) as caught:
        load(path)
    return str(caught.value)


def _campaign(tmp_path: Path, **changes) -> Path:
    data = copy.deepcopy(CAMPAIGN) | changes
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    return path


@pytest.mark.parametrize("kind", HOSTILE)
@pytest.mark.parametrize("place, field", [
    ("level", "factors.scheme."),
    ("factor", "factors."),
    ("ue", "fixed.ues[0].name"),
    ("schedule", "schedules."),
])
def test_campaign_names(tmp_path, kind, place, field):
    bad, char = HOSTILE[kind]
    changes = {
        "level": {"factors": {"scheme": {bad: {"cc": "cubic"}, "bbr": {"cc": "bbr"}}}},
        "factor": {"factors": {bad: {"x": {"cc": "cubic"}}}},
        "ue": {"fixed": {"n_prb": 25, "ues": [{"name": "ue" + bad}]}},
        "schedule": {"schedules": {bad: {"file": "walk.yaml"}}},
    }[place]
    said = _refused(load_campaign, _campaign(tmp_path, **changes))
    assert field in said and char in said and "c.yaml" in said, said
    assert "allowed: ASCII letters" in said, said


@pytest.mark.parametrize("kind", HOSTILE)
@pytest.mark.parametrize("place, field", [
    ("attenuator", "devices.attenuators[0].name"),
    ("ue", "devices.ues[0].name"),
    ("agent", "agents[0].name"),
])
def test_inventory_names(tmp_path, kind, place, field):
    bad, char = HOSTILE[kind]
    path = write_lab(tmp_path, attenuator_url="http://127.0.0.1:9")
    data = yaml.safe_load(path.read_text())
    if place == "attenuator":  # before: only min_length=1, so any character passed
        data["devices"]["attenuators"][0]["name"] = bad
        data["devices"]["ues"][0]["attenuator"]["attenuator"] = bad
    elif place == "ue":
        data["devices"]["ues"][0]["name"] = bad
    else:
        data["agents"][0]["name"] = bad
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    said = _refused(load_inventory, path)
    assert field in said and char in said, said


@pytest.mark.parametrize("kind", HOSTILE)
def test_key_and_agent_names(tmp_path, kind):
    bad, char = HOSTILE[kind]
    with pytest.raises(InputError, match=re.escape(char)):  # str.isalnum() took the Cyrillic letter
        generate_keypair(tmp_path / "keys", bad)
    assert not (tmp_path / "keys").exists() or not any((tmp_path / "keys").iterdir())
    assert not is_name(bad)  # re's `$` let "cubic\n" through
    with pytest.raises(InputError, match="not a valid agent name"):
        agent_name(bad)


def test_the_command_line_shows_the_message_as_text(capsys, tmp_path):
    """rich read '[a-z0-9]' in a pattern (and anything bracketed in a name) as a style tag and dropped it."""
    path = write_lab(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["tags"] = ["Bad"]
    path.write_text(yaml.safe_dump(data))
    code, out, err = cellab_in_process(capsys, "validate", str(path))
    assert code == 2 and "[a-z0-9]" in err, err
    code, out, err = cellab_in_process(capsys, "validate", str(_campaign(
        tmp_path, factors={"scheme": {"cu\u200bbic": {"cc": "cubic"}}})))
    said = " ".join(err.split())
    assert code == 2 and "factors.scheme.'cu\\u200bbic'" in said and "list[any]" not in said, said


def test_a_trailing_newline_is_no_part_of_a_checked_value():
    """re's `$` matches before a final newline: every pattern that guards a name, key or id is matched whole
    (agent names and endpoints on the bus, run ids in a result folder, systemd environment keys, namespace
    names, adb serials)."""
    from cellab.bus.names import check_endpoint
    from cellab.inventory.agent_install import parse_env
    from cellab.results.store_check import RUN_ID_PATTERN

    with pytest.raises(InputError):
        parse_env(["KEY\n=1"])
    with pytest.raises(InputError):
        check_endpoint("tcp://127.0.0.1:7700\n", "lab.yaml", "controller.bind")
    assert RUN_ID_PATTERN.fullmatch("a0fceef15d\n") is None
    from cellab.labs import netns

    with pytest.raises(Exception, match="not valid"):
        netns.create("ab\n")  # refused before anything is made (no root needed to get here)


def test_an_unknown_key_with_a_look_alike_is_shown_for_what_it_is(tmp_path):
    """'cс' (Latin c, Cyrillic с) was refused as "unknown parameter 'cс'" beside an allowed list holding 'cc'."""
    said = _refused(load_campaign, _campaign(tmp_path, fixed={"n_prb": 25, "c\u0441": "cubic"}))
    assert "fixed.'c\\u0441': unknown parameter 'c\\u0441' (it has U+0441 CYRILLIC SMALL LETTER ES)" in said, said


@pytest.mark.parametrize("kind", HOSTILE)
def test_inventory_adb_serials(tmp_path, kind):
    """An inventory phone's serial had no check at all (the adb client's own pattern is the Android room's)."""
    bad, char = HOSTILE[kind]
    path = write_lab(tmp_path)
    data = yaml.safe_load(path.read_text())
    data["devices"]["ues"][0].update(kind="android", serial="R5CR" + bad)
    path.write_text(yaml.safe_dump(data, allow_unicode=True))
    said = _refused(load_inventory, path)
    assert "devices.ues[0].serial" in said and char in said, said
