"""Hostile inventories whose parts contradict each other: each is refused when the inventory is loaded
(`cellab validate`, `cellab lab ...`, a run), naming the file, the field and what is allowed, never a
traceback; the consistent example still loads."""

from __future__ import annotations

import shutil
import textwrap
from pathlib import Path

import pytest

from cellab.bus.keys import generate_keypair
from cellab.errors import CellabError, InputError, InputErrors
from cellab.inventory.model import load_inventory
from cellab.testkit.helpers import run_cellab

ROOT = Path(__file__).resolve().parents[2]
AGENTS = ("controller", "enb1", "core1", "server1", "phone1", "phone2")

INVENTORY = """
name: hostile
controller: {bind: "tcp://0.0.0.0:7700", telemetry_bind: "tcp://0.0.0.0:7701", secret_key: keys/controller.key_secret}
hosts:
  - {name: enb-host, address: 192.0.2.3}
  - {name: core-host, address: 192.0.2.10}
  - {name: edge, address: 192.0.2.5, addresses: [198.51.100.5]}
agents:
  - {name: enb1, role: enb, host: enb-host, public_key: keys/enb1.key}
  - {name: core1, role: core, host: core-host, public_key: keys/core1.key}
  - {name: phone1, role: ue, host: enb-host, public_key: keys/phone1.key}
  - {name: phone2, role: ue, host: enb-host, public_key: keys/phone2.key}
  - {name: server1, role: server, host: edge, public_key: keys/server1.key}
devices:
  enb: [{name: b210, rf: uhd, agent: enb1, profile: enb.yaml}]
  core: [{name: epc, flavour: open5gs, agent: core1, profile: core.yaml}]
  ues:
    - {name: pixel, kind: android, serial: AAA111, agent: phone1}
    - {name: galaxy, kind: android, serial: BBB222, agent: phone2}
  servers: [{name: edge, agent: server1, address: 192.0.2.5, modules: [c2tcp, scubic]}]
"""


def lab(tmp_path: Path, *changes: tuple[str, str]) -> Path:
    keys = tmp_path / "keys"
    if not keys.exists():
        for name in AGENTS:
            generate_keypair(keys, name)
        shutil.copy(ROOT / "ran-config" / "examples" / "b210-25prb.yaml", tmp_path / "enb.yaml")
        shutil.copy(ROOT / "runs" / "labs" / "open5gs-core.yaml", tmp_path / "core.yaml")
    text = INVENTORY
    for old, new in changes:
        assert old in text, old
        text = text.replace(old, new)
    path = tmp_path / "lab.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def refused(path: Path) -> str:
    """The refusal's text (an inventory that loads fails the test)."""
    try:
        load_inventory(path)
    except (InputError, InputErrors) as exc:
        return str(exc)
    raise AssertionError(f"{path} was accepted")


def test_the_consistent_inventory_loads(tmp_path):
    inventory = load_inventory(lab(tmp_path))
    assert [u.serial for u in inventory.devices.ues] == ["AAA111", "BBB222"]


CONTRADICTIONS = [
    # an eNB's rf against its profile's radio (the profile is a B210's: uhd)
    ("rf-vs-profile", [("rf: uhd", "rf: zmq")], ["devices.enb[0].rf", "uhd"]),
    # a core's flavour against its profile's
    ("flavour-vs-profile", [("flavour: open5gs,", "flavour: srsepc,")], ["devices.core[0].flavour", "open5gs"]),
    # devices driven by an agent of the wrong role
    ("enb-by-ue-agent", [("agent: enb1, profile", "agent: phone1, profile")], ["devices.enb[0].agent", "'enb'"]),
    ("core-by-server-agent", [("agent: core1, profile", "agent: server1, profile")],
     ["devices.core[0].agent", "'core'"]),
    ("ue-by-server-agent", [("agent: phone2}", "agent: server1}")], ["devices.ues[1].agent", "'ue'"]),
    ("server-by-ue-agent", [("agent: server1, address", "agent: phone1, address")],
     ["devices.servers[0].agent", "'server'"]),
    # two phones with one serial
    ("one-serial", [("serial: BBB222", "serial: AAA111")], ["devices.ues[1].serial", "AAA111", "pixel"]),
    # two agents with one public key: the same file, or two files of one key
    ("one-key-file", [("keys/phone2.key", "keys/phone1.key")], ["agents[3].public_key", "phone1"]),
    # a controller secret key whose public half is an agent's key
    ("controller-is-agent", [("keys/controller.key_secret", "keys/server1.key_secret")],
     ["controller.secret_key", "server1"]),
    # addresses that are not addresses
    ("host-address", [("address: 192.0.2.3}", "address: not an address}")], ["hosts[0].address"]),
    ("host-address-octets", [("address: 192.0.2.3}", "address: 192.0.2.300}")], ["hosts[0].address"]),
    ("host-address-url", [("address: 192.0.2.3}", "address: 'http://192.0.2.3/'}")], ["hosts[0].address"]),
    ("host-addresses", [("addresses: [198.51.100.5]", "addresses: ['198.51.100.5;rm']")],
     ["hosts[2].addresses[0]"]),
    ("host-address-empty", [("address: 192.0.2.3}", "address: ''}")], ["hosts[0].address"]),
    ("bind-no-port", [('bind: "tcp://0.0.0.0:7700"', 'bind: "tcp://0.0.0.0"')], ["controller.bind"]),
    ("bind-port-range", [('bind: "tcp://0.0.0.0:7700"', 'bind: "tcp://0.0.0.0:70000"')], ["controller.bind"]),
    ("bind-scheme", [('bind: "tcp://0.0.0.0:7700"', 'bind: "http://0.0.0.0:7700"')], ["controller.bind"]),
    ("bind-host", [('bind: "tcp://0.0.0.0:7700"', 'bind: "tcp://no such host:7700"')], ["controller.bind"]),
    ("telemetry-bind", [('telemetry_bind: "tcp://0.0.0.0:7701"', 'telemetry_bind: "tcp://0.0.0.0:x"')],
     ["controller.telemetry_bind"]),
    ("server-address", [("address: 192.0.2.5, modules", "address: 'edge server', modules")],
     ["devices.servers[0].address"]),
    ("server-address-octets", [("address: 192.0.2.5, modules", "address: 192.0.2.500, modules")],
     ["devices.servers[0].address"]),
    # an unknown server module
    ("unknown-module", [("modules: [c2tcp, scubic]", "modules: [c2tcp, bbr3]")],
     ["devices.servers[0].modules", "c2tcp"]),
]


@pytest.mark.parametrize("case, changes, named", CONTRADICTIONS, ids=[c[0] for c in CONTRADICTIONS])
def test_a_contradiction_is_refused_naming_file_and_field(tmp_path, case, changes, named):
    message = refused(lab(tmp_path, *changes))
    assert "lab.yaml" in message
    for part in named:
        assert part in message, (case, message)


def test_two_key_files_holding_one_key_are_refused(tmp_path):
    path = lab(tmp_path)
    shutil.copy(tmp_path / "keys" / "phone1.key", tmp_path / "keys" / "phone2.key")
    message = refused(path)
    assert "agents[3].public_key" in message and "phone1" in message


@pytest.mark.parametrize("case, changes, named", CONTRADICTIONS[:3] + CONTRADICTIONS[-1:],
                         ids=[c[0] for c in CONTRADICTIONS[:3] + CONTRADICTIONS[-1:]])
def test_validate_refuses_without_a_traceback(tmp_path, case, changes, named):
    result = run_cellab("validate", str(lab(tmp_path, *changes)))
    assert result.returncode != 0
    assert "Traceback" not in result.stderr + result.stdout
    assert named[0] in result.stdout + result.stderr


def test_every_error_is_a_cellab_error(tmp_path):
    """Many contradictions at once: all reported, still one CellabError."""
    path = lab(tmp_path, ("serial: BBB222", "serial: AAA111"), ("modules: [c2tcp, scubic]", "modules: [nope]"))
    with pytest.raises(CellabError):
        load_inventory(path)
