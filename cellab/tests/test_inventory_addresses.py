"""Addresses fit their hosts: a server's address is its agent's host's (not another host's, not the core's UE
gateway on another host, not a phone's), a loopback controller has no remote agents, a core's S1-MME address
is not another host's. Names are not resolved (a note says what was not compared); a loopback host is a
one-host lab whose namespaces the inventory does not list."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import yaml

from cellab.bus.keys import generate_keypair
from cellab.errors import InputError, InputErrors
from cellab.inventory.model import address_notes, check_consistency, load_inventory

CORE_PROFILE = """
name: lab-core
flavour: open5gs
plmn: {mcc: "001", mnc: "01"}
tacs: [1]
mme: {s1ap_addr: 192.168.10.2}
gtpu_addr: 192.168.10.2
ue_subnet: 10.45.0.0/16
"""


def lab(tmp_path: Path, server_address: str = "192.168.10.5", server_host: str = "edge", **change: object) -> Path:
    """A four-host lab (eNB, core, phones, edge) with an Open5GS core whose UE subnet is 10.45.0.0/16."""
    names = ("controller", "enb1", "core1", "phone1", "server1")
    for name in names:
        if not (tmp_path / "keys" / f"{name}.key").exists():
            generate_keypair(tmp_path / "keys", name)
    profile = str(change.pop("core_profile", CORE_PROFILE))
    (tmp_path / "core.yaml").write_text(textwrap.dedent(profile))
    data: dict = {
        "name": "lab",
        "controller": {"secret_key": "keys/controller.key_secret"},
        "hosts": [{"name": "enb-host", "address": "192.168.10.3"}, {"name": "core-host", "address": "192.168.10.2"},
                  {"name": "box-host", "address": "192.168.10.4"}, {"name": "edge", "address": "192.168.10.5"}],
        "agents": [{"name": "enb1", "role": "enb", "host": "enb-host", "public_key": "keys/enb1.key"},
                   {"name": "core1", "role": "core", "host": "core-host", "public_key": "keys/core1.key"},
                   {"name": "phone1", "role": "ue", "host": "box-host", "public_key": "keys/phone1.key"},
                   {"name": "server1", "role": "server", "host": server_host, "public_key": "keys/server1.key"}],
        "devices": {"core": [{"name": "open5gs", "flavour": "open5gs", "agent": "core1", "profile": "core.yaml"}],
                    "ues": [{"name": "pixel", "kind": "android", "serial": "X1", "agent": "phone1"}],
                    "servers": [{"name": "edge", "agent": "server1", "address": server_address}]},
    }
    for dotted, value in change.items():
        target = data
        *parents, last = dotted.split("__")
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        target[int(last) if isinstance(target, list) else last] = value
    path = tmp_path / "lab.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def refused(path: Path) -> str:
    with pytest.raises((InputError, InputErrors)) as info:
        load_inventory(path)
    text = str(info.value)
    assert str(path) in text
    return text


def test_the_server_at_its_host_address_fits(tmp_path):
    inventory = load_inventory(lab(tmp_path))
    assert inventory.devices.servers[0].address == "192.168.10.5"
    assert address_notes(inventory) == []


def test_the_upf_gateway_on_the_core_host_is_not_the_edge_server(tmp_path):
    # the example lab's mistake: the server agent on `edge` given the UPF's ogstun address on the core host
    text = refused(lab(tmp_path, "10.45.0.1"))
    assert "devices.servers[0].address: 10.45.0.1 is the gateway of core open5gs's UE subnet 10.45.0.0/16" in text
    assert "on host core-host" in text and "runs on host edge (192.168.10.5)" in text


def test_a_phone_address_is_not_the_server(tmp_path):
    assert "10.45.3.7 is inside core open5gs's UE subnet 10.45.0.0/16: a phone's address" in refused(
        lab(tmp_path, "10.45.3.7"))


def test_another_host_address_is_refused_naming_that_host(tmp_path):
    text = refused(lab(tmp_path, "192.168.10.4"))
    assert "192.168.10.4 is host box-host's address (agents: phone1)" in text
    assert "server edge's agent server1 runs on host edge (192.168.10.5)" in text


def test_an_address_the_host_does_not_list_is_refused_until_listed(tmp_path):
    text = refused(lab(tmp_path, "10.50.0.5"))
    assert "10.50.0.5 is not an address of host edge (192.168.10.5)" in text
    assert "list 10.50.0.5 under hosts[3].addresses" in text
    inventory = load_inventory(lab(tmp_path, "10.50.0.5", hosts__3={"name": "edge", "address": "192.168.10.5",
                                                                   "addresses": ["10.50.0.5"]}))
    assert inventory.hosts[3].addresses == ["10.50.0.5"]


def test_the_gateway_fits_a_server_on_the_core_host(tmp_path):
    # srsEPC's SGi on the core host: the server behind the core's own tun device
    inventory = load_inventory(lab(tmp_path, "10.45.0.1", server_host="core-host"))
    assert inventory.devices.servers[0].address == "10.45.0.1"


def test_names_are_not_resolved_but_noted(tmp_path):
    inventory = load_inventory(lab(tmp_path, "edge.lab.example"))
    [note] = address_notes(inventory)
    assert "edge.lab.example" in note and "not compared" in note
    inventory = load_inventory(lab(tmp_path, "192.168.10.77", hosts__3={"name": "edge", "address": "edge.lab"}))
    assert "not compared" in address_notes(inventory)[0]
    # a name that is another host's address is still another host's
    assert "is host box-host's address" in refused(
        lab(tmp_path, "box.lab", hosts__2={"name": "box-host", "address": "box.lab"}))


def test_a_loopback_host_is_a_one_host_lab(tmp_path):
    hosts = [{"name": n, "address": "127.0.0.1"} for n in ("enb-host", "core-host", "box-host", "edge")]
    inventory = load_inventory(lab(tmp_path, "10.200.0.1", hosts=hosts,
                                   controller={"secret_key": "keys/controller.key_secret",
                                               "bind": "tcp://127.0.0.1:7700", "telemetry_bind": "tcp://127.0.0.1:7701"}))
    assert inventory.devices.servers[0].address == "10.200.0.1"  # the server namespace's address


def test_a_loopback_controller_with_remote_agents_is_refused(tmp_path):
    text = refused(lab(tmp_path, controller={"secret_key": "keys/controller.key_secret",
                                             "bind": "tcp://127.0.0.1:7700"}))
    assert ("controller.bind: tcp://127.0.0.1:7700 listens on loopback only, but agent enb1 runs on host enb-host"
            in text)
    assert "bind tcp://0.0.0.0:7700" in text


def test_a_telemetry_port_agents_do_not_derive_is_noted(tmp_path):
    inventory = load_inventory(lab(tmp_path, controller={"secret_key": "keys/controller.key_secret",
                                                         "telemetry_bind": "tcp://0.0.0.0:7801"}))
    [note] = address_notes(inventory)
    assert "--telemetry tcp://CONTROLLER:7801" in note


def test_a_core_listening_on_another_host_s_address_is_refused(tmp_path):
    path = lab(tmp_path, core_profile=CORE_PROFILE.replace("s1ap_addr: 192.168.10.2", "s1ap_addr: 192.168.10.3"))
    inventory = load_inventory(path)
    with pytest.raises(InputErrors) as info:
        check_consistency(inventory, path)
    assert ("devices.core[0].profile: the S1-MME address 192.168.10.3" in str(info.value)
            and "is host enb-host's address, but core open5gs's agent core1 runs on host core-host" in str(info.value))
    check_consistency(load_inventory(lab(tmp_path)), path)  # the core host's own address: fine
