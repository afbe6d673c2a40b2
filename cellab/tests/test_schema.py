"""`cellab schema`: the campaign/lab/inventory reference generated from the models (docs/campaign.md is its
output and must not be stale); unknown keys are refused with the allowed keys, the closest one, and where the
key belongs when it is allowed elsewhere."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from pydantic import BaseModel

from cellab.bus.keys import generate_keypair
from cellab.campaign import schema
from cellab.campaign.load import load_campaign
from cellab.campaign.model import (
    Campaign,
    Order,
    Retry,
    ScheduleSpec,
    Timeouts,
    TransportParams,
    UESpec,
    Workload,
)
from cellab.errors import InputError, InputErrors, unknown_key
from cellab.inventory.model import Inventory, load_inventory
from cellab.labs import EMBEDDED_LABS, embedded_lab_class
from cellab.testkit.helpers import cellab_in_process

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "campaign.md"


def cellab(capsys, *args: str) -> tuple[int, str, str]:
    return cellab_in_process(capsys, *args)


def rows(text: str) -> dict[str, list[list[str]]]:
    """Section title -> its table rows (cells, stripped)."""
    out: dict[str, list[list[str]]] = {}
    title = ""
    for line in text.splitlines():
        if line.startswith("#"):
            title = line.lstrip("#").strip()
            out[title] = []
        elif line.startswith("| `"):
            out[title].append([c.strip() for c in line.strip("|").split(" | ")])
    return out


def test_docs_campaign_md_is_generated_from_the_models():
    assert DOC.is_file(), f"docs/campaign.md is missing: generate it with `{schema.REGENERATE}`"
    assert DOC.read_text() == schema.render("all"), (
        f"docs/campaign.md is stale (a model changed): regenerate it with `.venv/bin/{schema.REGENERATE}`")


@pytest.mark.parametrize("model, title", [
    (Campaign, "top level"), (Order, "`order`"), (ScheduleSpec, "`schedules.NAME`"), (Workload, "`workload`"),
    (Timeouts, "`timeouts`"), (Retry, "`retry`"), (TransportParams, "every lab"),
    (UESpec, "`ues[]`: one UE of a run")])
def test_every_campaign_field_is_listed_with_its_default(model: type[BaseModel], title: str):
    tables = rows(schema.render("campaign"))
    listed = {r[0].strip("`"): r for r in tables[title]}
    assert set(listed) == set(model.model_fields), title
    for name, info in model.model_fields.items():
        if info.is_required():
            assert listed[name][3] == "required"
        elif not isinstance(info.default, BaseModel) and info.default_factory is None:
            assert listed[name][3] == schema.value_text(info.default), name


def test_every_lab_and_the_inventory_are_listed():
    text = schema.render("all")
    tables = rows(text)
    for kind in EMBEDDED_LABS:
        fields = set(embedded_lab_class(kind).params_model.model_fields) - set(schema.RUN_PARAMS_SET_ELSEWHERE)
        title = f"lab `{kind}`"
        assert title in tables, title
        if tables[title]:  # a lab that shares another's model points to it instead
            assert {r[0].strip("`") for r in tables[title]} == fields
        else:
            assert "The parameters of lab `" in text.split(f"### {title}")[1].split("###")[0]
    assert {r[0].strip("`") for r in tables["lab inventory (`lab: LAB.yaml`)"]} >= {"n_prb", "attenuation_db"}
    inventory = rows(schema.render("inventory"))
    assert {r[0].strip("`") for r in inventory["top level"]} == set(Inventory.model_fields)
    assert {r[0].strip("`") for r in inventory["`hosts[]`"]} == {"name", "address", "addresses"}
    for title in ("`controller`", "`agents[]`", "`devices`", "`devices.enb[]`", "`devices.core[]`",
                  "`devices.attenuators[]`", "`devices.ues[]`", "`devices.ues[].attenuator`", "`devices.servers[]`"):
        assert inventory[title], title


def test_types_units_defaults_and_allowed_values():
    tables = rows(schema.render("all"))
    workload = {r[0].strip("`"): r for r in tables["`workload`"]}
    assert workload["duration_s"][1:5] == ["number", "s", "10.0", "0 < value ≤ 3600"]
    assert workload["kind"][4] == "download, upload"
    assert workload["ping_interval_ms"][1:3] == ["number or null", "ms"]
    wired = {r[0].strip("`"): r for r in tables["lab `wired`"]}
    assert wired["rate_mbit"][2] == "Mbit/s" and wired["buffer_bytes"][2] == "bytes"
    virtual = {r[0].strip("`"): r for r in tables["lab `virtual`"]}
    assert virtual["n_prb"][1:5] == ["integer", "PRB", "25", "6, 15, 25, 50, 75, 100"]
    assert virtual["rlc_queue"][4] == "srsenb; or integer"
    assert "n_ues" not in virtual  # set with `ues`
    top = {r[0].strip("`"): r for r in rows(schema.render("campaign"))["top level"]}
    assert top["measurements"][4] == "throughput, rtt, tcp_info, pcap"
    assert top["name"][3] == "required"
    common = {r[0].strip("`"): r for r in tables["every lab"]}
    assert common["module_params"][4].startswith("keys: c2tcp")
    assert schema.unit_of("fading_coherence_ms") == "ms" and schema.unit_of("max_slew_db_per_s") == "dB/s"
    assert schema.unit_of("center", "the cell's center frequency (MHz)") == "MHz"
    assert schema.unit_of("name", "not a unit (see below)") == ""


def test_the_command_prints_one_part_or_writes_the_file(capsys, tmp_path):
    code, out, _ = cellab(capsys, "schema", "lab", "wired")
    assert code == 0 and "### lab `wired`" in out and "### every lab" in out and "### lab `virtual`" not in out
    code, out, _ = cellab(capsys, "schema", "inventory")
    assert code == 0 and "### `devices.servers[]`" in out and "## Campaign file" not in out
    code, out, _ = cellab(capsys, "schema", "campaign")
    assert code == 0 and "### `workload`" in out and "### lab `wired`" not in out and "### every lab" in out
    code, _, err = cellab(capsys, "schema", "lab", "nosuchlab")
    assert code == 2 and "unknown lab kind 'nosuchlab'" in err and "srsran-zmq" in err
    out_file = tmp_path / "campaign.md"
    code, _, _ = cellab(capsys, "schema", "--out", str(out_file))
    assert code == 0 and out_file.read_text() == schema.render("all")


def test_an_inventory_file_gets_its_own_parameters(capsys, tmp_path):
    for name in ("controller", "server1", "ue1", "atten1"):
        generate_keypair(tmp_path / "keys", name)
    (tmp_path / "lab.yaml").write_text(textwrap.dedent("""
        name: lab
        controller: {secret_key: keys/controller.key_secret}
        hosts: [{name: edge, address: 10.0.0.1}, {name: bench, address: 10.0.0.2}]
        agents:
          - {name: server1, role: server, host: edge, public_key: keys/server1.key}
          - {name: ue1, role: ue, host: bench, public_key: keys/ue1.key}
          - {name: atten1, role: attenuator, host: bench, public_key: keys/atten1.key}
        devices:
          servers: [{name: edge, agent: server1, address: 10.0.0.1}]
          ues: [{name: phone, kind: virtual, agent: ue1, attenuator: {attenuator: box1, channel: 3}}]
          attenuators: [{name: box1, model: minicircuits-rc4dat, transport: http, address: "http://127.0.0.1:1",
                         channels: 4, min_db: 5, max_db: 60, agent: atten1}]
    """))
    code, out, err = cellab(capsys, "schema", "lab", str(tmp_path / "lab.yaml"))
    assert code == 0, err
    [row] = [r for r in rows(out)[f"lab inventory `{tmp_path / 'lab.yaml'}`"] if r[0] == "`attenuation_db`"]
    assert row[4] == "5 ≤ value ≤ 60"


# ------------------------------------------------------------------ unknown keys
def campaign_error(tmp_path: Path, text: str) -> str:
    path = tmp_path / "c.yaml"
    path.write_text(textwrap.dedent(text))
    with pytest.raises((InputError, InputErrors)) as info:
        load_campaign(path)
    return str(info.value)


def test_a_misspelt_key_names_the_allowed_ones_and_the_closest(tmp_path):
    text = campaign_error(tmp_path, "name: c\nworkload: {duration: 5}\n")
    assert "workload.duration: unknown key 'duration': did you mean 'duration_s'?" in text
    assert "(allowed: duration_s, flow_start_ms, flows, kind, ping_interval_ms, size_bytes, sr_probes, sr_probes_max, tool)" in text
    text = campaign_error(tmp_path, "name: c\nschedules: {walk: {fil: w.yaml}}\n")
    assert "schedules.walk.fil: unknown key 'fil': did you mean 'file'?" in text
    text = campaign_error(tmp_path, "name: c\nretry: {attempts: 3}\n")
    assert "did you mean 'max_attempts'?" in text
    assert "Extra inputs are not permitted" not in text


def test_a_key_in_the_wrong_place_says_where_it_belongs(tmp_path):
    text = campaign_error(tmp_path, "name: c\nduration_s: 5\n")
    # a fault plan's faults have a duration_s too (cellab/faults/spec.py)
    assert ("duration_s: unknown key 'duration_s': 'duration_s' belongs at faults.NAME[].duration_s, "
            "workload.duration_s") in text
    text = campaign_error(tmp_path, "name: c\nn_prb: 25\n")
    assert "'n_prb' belongs at fixed.n_prb (run parameters go under fixed or factors)" in text
    text = campaign_error(tmp_path, "name: c\nworkload: {cc: bbr}\n")
    assert "'cc' belongs at fixed.cc" in text
    # fixed.duration_s: a run parameter that is not one (cellab/campaign/model.py names the parameters it knows)
    error = unknown_key("c.yaml", "fixed.duration_s", "duration_s", ["cc", "n_prb", "sr_period_ms"], "campaign",
                        "unknown parameter")
    assert ("unknown parameter 'duration_s': 'duration_s' belongs at faults.NAME[].duration_s, workload.duration_s"
            in str(error))
    assert error.allowed == ["cc", "n_prb", "sr_period_ms"]
    error = unknown_key("c.yaml", "fixed.rate_mbit", "rate_mbit", ["cc", "n_prb"], "campaign", "unknown parameter")
    assert "'rate_mbit' is a run parameter of lab wired" in str(error)
    error = unknown_key("c.yaml", "factors.sr_period", "sr_period", ["cc", "sr_period_ms"], "campaign")
    assert "did you mean 'sr_period_ms'?" in str(error)


def test_a_ue_key_in_a_list_of_ues_is_named_without_pydantic_s_union_tags(tmp_path):
    text = campaign_error(tmp_path, "name: c\nlab: wired\nfixed: {ues: [{name: a, flow: 2}]}\n")
    assert "unknown key 'flow': did you mean 'flows'?" in text and "list[UESpec]" not in text


def test_an_inventory_key_names_the_allowed_ones(tmp_path):
    generate_keypair(tmp_path / "keys", "controller")
    path = tmp_path / "lab.yaml"
    path.write_text(textwrap.dedent("""
        name: lab
        controller: {secret_key: keys/controller.key_secret, bnd: "tcp://0.0.0.0:7700"}
        hosts: [{name: edge, addr: 10.0.0.1}]
        servers: []
    """))
    with pytest.raises(InputErrors) as info:
        load_inventory(path)
    text = str(info.value)
    assert "controller.bnd: unknown key 'bnd': did you mean 'bind'? (allowed: bind, secret_key, telemetry_bind)" in text
    assert "hosts[0].addr: unknown key 'addr': did you mean 'address'? (allowed: address, addresses, name)" in text
    assert "servers: unknown key 'servers': 'servers' belongs at devices.servers" in text
