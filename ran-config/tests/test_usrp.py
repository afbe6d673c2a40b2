"""USRP discovery parsing on recorded output written from UHD's documented formats (no device here), and the
command's behaviour with the tools stubbed on PATH."""

from __future__ import annotations

import stat
from pathlib import Path

import yaml
from typer.testing import CliRunner

from cellab.cli import app
from cellab.inventory.model import EnbEntry
from cellab.ran.usrp import discover, inventory_snippet, parse_find_devices, parse_probe

DATA = Path(__file__).parent / "data"


def test_find_devices_blocks():
    devices = parse_find_devices((DATA / "uhd_find_devices.txt").read_text())
    assert [(d.product, d.serial, d.family) for d in devices] == [("B210", "3218C8E", "b2xx"), ("X310", "31A4C5B", "x3xx")]
    assert devices[1].device_args() == "type=x300,serial=31A4C5B,addr=192.168.40.2"
    assert parse_find_devices("No UHD Devices Found\n") == []


def test_probe_tree():
    probe = parse_probe((DATA / "uhd_usrp_probe_b210.txt").read_text())
    assert probe["mboard"] == "B210" and probe["serial"] == "3218C8E"
    assert probe["fw version"] == "8.0" and probe["fpga version"] == "16.0"
    assert probe["clock sources"] == ["internal", "external", "gpsdo"]
    assert probe["daughterboards"] == ["RX Dboard A", "TX Dboard A"] and probe["errors"] == []
    assert parse_probe("|   Error: RuntimeError: no devices found\n")["errors"] == ["Error: RuntimeError: no devices found"]


def test_inventory_snippet_is_valid_inventory_entries():
    devices = parse_find_devices((DATA / "uhd_find_devices.txt").read_text())
    entries = yaml.safe_load(inventory_snippet(devices))["devices"]["enb"]
    parsed = [EnbEntry.model_validate(e) for e in entries]  # the core inventory's own model accepts them
    assert [e.device_args for e in parsed] == ["type=b200,serial=3218C8E", "type=x300,serial=31A4C5B,addr=192.168.40.2"]


def _stub(folder: Path, name: str, text: str, code: int = 0) -> None:
    path = folder / name
    path.write_text(f"#!/bin/sh\ncat <<'END'\n{text}\nEND\nexit {code}\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_discover_and_cli_with_stubbed_tools(tmp_path: Path, monkeypatch):
    _stub(tmp_path, "uhd_find_devices", (DATA / "uhd_find_devices.txt").read_text())
    _stub(tmp_path, "uhd_usrp_probe", (DATA / "uhd_usrp_probe_b210.txt").read_text())
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    devices = discover()
    assert [d.health for d in devices] == ["ok", "ok"]
    result = CliRunner().invoke(app, ["ran", "usrp"])
    assert result.exit_code == 0, result.output
    assert "serial=3218C8E" in result.output and "B210 serial 3218C8E family b2xx, ok" in result.output


def test_cli_without_uhd_host(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    result = CliRunner().invoke(app, ["ran", "usrp"])
    assert result.exit_code == 2 and "uhd-host" in result.output
