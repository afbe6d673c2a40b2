"""Issue 27, campaigns against their lab: a run's `ues` is checked against the UEs the lab has — more UEs than
an inventory (or an embedded lab's max_ues) lists, a UE name the inventory lacks, attenuation beyond the box in
front of that UE — naming the campaign, the field and the allowed values. Before, `validate` accepted all of
them (the run failed, or labelled the inventory's first UE 'ghost', or skipped the UE's attenuation). A named
inventory UE is that device at run time, not the UE in its slot."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml

from cellab.campaign.load import load_campaign
from cellab.errors import InputErrors
from cellab.inventory.lab_attenuator import inventory_attenuator
from cellab.inventory.model import load_inventory
from cellab.records import PlannedRun
from cellab.run.step import run_ues
from cellab.testkit.helpers import write_lab


def _campaign(tmp_path: Path, lab: str, ues: object) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump({"name": "c", "lab": lab, "fixed": {"ues": ues},
                                    "workload": {"tool": "iperf3", "duration_s": 2}}))
    return path


@pytest.fixture
def lab(tmp_path) -> str:
    # phone and phone2 behind box1 (channels 3 and 4, 10..60 dB)
    return str(write_lab(tmp_path, attenuator_url="http://127.0.0.1:9", ues=2))


@pytest.mark.parametrize("ues, field, says, allowed", [
    (3, "fixed.ues", "3 UEs: lab", "allowed: phone, phone2"),
    ("3", "fixed.ues", "3 UEs: lab", "allowed: phone, phone2"),  # text the schema turns into 3
    ([{"name": "phone"}, {"name": "ghost"}], "fixed.ues[1].name", "UE 'ghost' is not in lab", "phone, phone2"),
    ([{"name": "phone", "attenuation_db": 70}], "fixed.ues[0].attenuation_db", "70 dB is beyond attenuator box1",
     "allowed: 10 .. 60"),
    ([{"name": "phone"}, {"name": "phone2", "attenuation_db": 5}], "fixed.ues[1].attenuation_db",
     "serves UE phone2", "allowed: 10 .. 60"),
    ([{"name": "phone", "attenuation_db": "70"}], "fixed.ues[0].attenuation_db", "70 dB is beyond", "10 .. 60"),
])
def test_inventory_refuses(tmp_path, lab, ues, field, says, allowed):
    with pytest.raises(InputErrors) as caught:
        load_campaign(_campaign(tmp_path, lab, ues))
    said = str(caught.value)
    assert f"c.yaml: {field}: " in said and says in said and allowed in said, said


@pytest.mark.parametrize("lab_kind, ues, says", [
    ("wired", 2, "2 UEs: lab wired has 1 (allowed: 1..1)"),
    ("srsran-zmq", 5, "5 UEs: lab srsran-zmq has 4"),
    ("virtual", [{"name": "a", "attenuation_db": 500}], "500 dB is beyond attenuator vlab-atten"),
    ("srsran-zmq", [{"name": "a", "attenuation_db": 30}], "30 dB is beyond lab srsran-zmq's own per-UE attenuation"),
    ("wired", [{"name": "a", "attenuation_db": 3}], "no attenuator is in front of UE a in lab wired"),
])
def test_embedded_labs_refuse(tmp_path, lab_kind, ues, says):
    with pytest.raises(InputErrors) as caught:
        load_campaign(_campaign(tmp_path, lab_kind, ues))
    assert says in str(caught.value), str(caught.value)


def test_what_the_lab_has_is_accepted(tmp_path, lab):
    for ues in (2, [{"name": "phone2", "attenuation_db": 60}], [{"name": "phone2"}, {"name": "phone"}]):
        load_campaign(_campaign(tmp_path, lab, ues))
    load_campaign(_campaign(tmp_path, "srsran-zmq", [{"name": "near", "attenuation_db": 0},
                                                     {"name": "far", "attenuation_db": 12}]))


def test_a_named_inventory_ue_is_that_device(lab):
    inventory = load_inventory(lab)
    session = SimpleNamespace(ue_agents=[u.agent for u in inventory.devices.ues],
                              topology=SimpleNamespace(ues=[SimpleNamespace(name=u.name) for u in inventory.devices.ues]),
                              attenuator=inventory_attenuator(inventory))
    campaign = SimpleNamespace(lab=lab, workload=SimpleNamespace(flows=1))
    run = PlannedRun(index=0, run_id="r", repeat=0, factors={}, params={"cc": "cubic", "ues": [{"name": "phone2"}]})
    (ue,) = run_ues(session, campaign, run)  # before: slot 0, the agent and channel of `phone`
    assert (ue.name, ue.agent, ue.channel, ue.lab_index, ue.slot) == ("phone2", "ue2", 4, 1, 0)


@pytest.mark.parametrize("ue, field", [({"name": "phone2", "attenuation_db": 20}, "fixed.ues[0].attenuation_db"),
                                       ({"name": "phone2", "schedule": "walk"}, "fixed.ues[0].schedule")])
def test_a_ue_behind_a_box_the_runs_do_not_drive(tmp_path, lab, ue, field):
    """Runs drive one box (the first attenuated UE's): a UE behind another one had its attenuation and its
    schedule skipped without a word."""
    data = yaml.safe_load(Path(lab).read_text())
    data["devices"]["attenuators"].append(dict(data["devices"]["attenuators"][0], name="box2"))
    data["devices"]["ues"][1]["attenuator"] = {"attenuator": "box2", "channel": 1}
    Path(lab).write_text(yaml.safe_dump(data))
    (tmp_path / "walk.yaml").write_text("segments: [{kind: hold, db: 20, duration_s: 1}]\n")
    path = _campaign(tmp_path, lab, [ue])
    text = yaml.safe_load(path.read_text()) | {"schedules": {"walk": {"file": "walk.yaml"}}}
    path.write_text(yaml.safe_dump(text))
    with pytest.raises(InputErrors) as caught:
        load_campaign(path)
    said = str(caught.value)
    assert f"{field}: UE phone2 is behind attenuator box2; runs drive box1" in said, said


@pytest.mark.parametrize("fixed, field", [({"attenuation_db": 20}, "fixed.attenuation_db"),
                                          ({"schedule": "walk"}, "fixed.schedule")])
def test_a_runs_own_attenuation_on_an_inventory_with_two_boxes(tmp_path, lab, fixed, field):
    """A run-level attenuation or schedule is for every UE of the run: on an inventory whose second UE is behind
    another box it reached the first UE only, without a word. A run of only the first UE is fine."""
    data = yaml.safe_load(Path(lab).read_text())
    data["devices"]["attenuators"].append(dict(data["devices"]["attenuators"][0], name="box2"))
    data["devices"]["ues"][1]["attenuator"] = {"attenuator": "box2", "channel": 1}
    Path(lab).write_text(yaml.safe_dump(data))
    (tmp_path / "walk.yaml").write_text("channels: [3]\nsegments: [{kind: hold, db: 20, duration_s: 1}]\n")
    path = _campaign(tmp_path, lab, 2)
    text = yaml.safe_load(path.read_text())
    text["fixed"].update(fixed)
    path.write_text(yaml.safe_dump(text | {"schedules": {"walk": {"file": "walk.yaml"}}}))
    with pytest.raises(InputErrors) as caught:
        load_campaign(path)
    said = str(caught.value)
    assert f"{field}: applies to every UE of a run, but UE phone2 is behind attenuator box2; runs drive box1" in said
    text["fixed"]["ues"] = [{"name": "phone"}]
    path.write_text(yaml.safe_dump(text | {"schedules": {"walk": {"file": "walk.yaml"}}}))
    load_campaign(path)
