"""Lab inventory schema: references between hosts, agents and devices are checked."""

from __future__ import annotations

import textwrap

import pytest

from cellab.bus.keys import generate_keypair
from cellab.errors import InputError, InputErrors
from cellab.inventory.model import load_inventory

INVENTORY = """
name: shieldbox-lab
controller: {bind: "tcp://0.0.0.0:7700", secret_key: keys/controller.key_secret}
hosts:
  - {name: edge1, address: 192.0.2.10}
  - {name: bench, address: 192.0.2.20}
agents:
  - {name: server1, role: server, host: edge1, public_key: keys/server1.key}
  - {name: enb1, role: enb, host: edge1, public_key: keys/enb1.key}
  - {name: core1, role: core, host: edge1, public_key: keys/core1.key}
  - {name: atten1, role: attenuator, host: bench, public_key: keys/atten1.key}
  - {name: phone1, role: ue, host: bench, public_key: keys/phone1.key}
devices:
  enb: [{name: enb1, rf: uhd, device_args: "type=b200", agent: enb1}]
  core: [{name: epc, flavour: open5gs, version: "2.7", agent: core1}]
  attenuators:
    - {name: box1, model: minicircuits-rcdat, transport: serial, address: /dev/ttyUSB0, channels: 4,
       min_db: 10, max_db: 95, agent: atten1}
  ues: [{name: pixel, kind: android, serial: ABC123, agent: phone1, attenuator: {attenuator: box1, channel: 2}}]
  servers: [{name: edge1, agent: server1, address: 192.0.2.10, modules: [c2tcp]}]
"""


def make(tmp_path, text=INVENTORY):
    keys = tmp_path / "keys"
    keys.mkdir(exist_ok=True)
    for name in ("controller", "server1", "enb1", "core1", "atten1", "phone1"):  # real CURVE certificates: validate reads them
        if not (keys / f"{name}.key").exists():
            generate_keypair(keys, name)
    path = tmp_path / "lab.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_valid_inventory_resolves_key_paths(tmp_path):
    inv = load_inventory(make(tmp_path))
    assert inv.agent("ue").name == "phone1"
    assert inv.controller.secret_key == tmp_path / "keys" / "controller.key_secret"


@pytest.mark.parametrize(
    "old, new, message",
    [
        ("host: bench, public_key: keys/phone1.key", "host: lab9, public_key: keys/phone1.key", "host 'lab9' is not in hosts"),
        ("channel: 2}", "channel: 7}", "exceeds the attenuator's channels"),
        ("min_db: 10, max_db: 95", "min_db: 95, max_db: 10", "min_db (95.0) must be below max_db"),
        ("flavour: open5gs", "flavour: free5gc", "allowed: open5gs, open5gs-2.6, nextepc, srsepc"),
        ("agent: atten1}", "agent: nobody}", "agent 'nobody' is not in agents"),
        ("{name: atten1, role: attenuator", "{name: atten1, role: ue",
         "attenuator box1: agent 'atten1' has role 'ue', not 'attenuator'"),
        ("address: 192.0.2.10, modules", "address: 192.0.2.20, modules",
         "devices.servers[0].address: 192.0.2.20 is host bench's address"),
        ("{name: bench, address: 192.0.2.20}", "{name: bench, adress: 192.0.2.20}",
         "hosts[1].adress: unknown key 'adress': did you mean 'address'?"),
    ],
)
def test_bad_inventory(tmp_path, old, new, message):
    assert old in INVENTORY
    with pytest.raises((InputError, InputErrors)) as info:
        load_inventory(make(tmp_path, INVENTORY.replace(old, new)))
    assert message in str(info.value) and "lab.yaml" in str(info.value)


def test_missing_key_file_is_named(tmp_path):
    path = make(tmp_path)
    (tmp_path / "keys" / "phone1.key").unlink()
    with pytest.raises(InputError, match=r"agents\.phone1\.public_key: .*phone1.key: key file not found"):
        load_inventory(path)
