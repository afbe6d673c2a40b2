"""Clock offsets, artifact transfer, telemetry, keys and the `cellab keys` command."""

from __future__ import annotations

import os
import stat
import threading
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cellab.bus import ClockOffset, OperationError
from cellab.bus.cli import keys_app, keys_command
from cellab.bus.demo import DemoAgent
from cellab.bus.keys import generate_keypair, load_public_key, load_secret_key
from cellab.bus.testing import lab_bus
from cellab.errors import InputError

SKEW_S = 12.345


def test_clock_offset_of_a_skewed_agent(tmp_path: Path) -> None:
    kwargs = {"skewed": {"clock": lambda: time.time() + SKEW_S}}
    with lab_bus(tmp_path, {"plain": DemoAgent, "skewed": DemoAgent}, agent_kwargs=kwargs) as (controller, _):
        skewed = controller.measure_clock_offset("skewed", samples=8)
        plain = controller.measure_clock_offset("plain")
    assert isinstance(skewed, ClockOffset) and skewed.samples == 8 and skewed.agent == "skewed"
    assert 0 < skewed.rtt_s < 0.05
    # The error of the midpoint rule is at most half the round trip.
    assert abs(skewed.offset_s - SKEW_S) <= skewed.rtt_s / 2 + 1e-3
    assert abs(plain.offset_s) <= plain.rtt_s / 2 + 1e-3
    assert skewed.model_dump()["offset_s"] == skewed.offset_s  # JSON-able for the run manifest


def test_artifact_fetch(tmp_path: Path) -> None:
    art = tmp_path / "artifacts" / "ue1"
    (art / "probe").mkdir(parents=True)
    payload = os.urandom(3 * 1024 * 1024 + 12345)
    (art / "probe" / "trace.bin").write_bytes(payload)
    (art / "empty.log").write_bytes(b"")
    secret = tmp_path / "outside.txt"
    secret.write_text("not yours")
    (art / "sneaky").symlink_to(secret)
    with lab_bus(tmp_path, {"ue1": DemoAgent}) as (controller, agents):
        listing = controller.request("ue1", "list_artifacts")["artifacts"]
        assert {"name": "probe/trace.bin", "size_bytes": len(payload)} in [
            {k: a[k] for k in ("name", "size_bytes")} for a in listing]
        assert all(a["name"] != "sneaky" for a in listing)

        dest = tmp_path / "got"
        dest.mkdir()
        out = controller.fetch_artifact("ue1", "probe/trace.bin", dest, chunk_bytes=1024 * 1024)
        assert out == dest / "trace.bin" and out.read_bytes() == payload
        assert controller.fetch_artifact("ue1", "empty.log", dest / "e.log").read_bytes() == b""

        for bad in ("../outside.txt", "/etc/passwd", "probe/../../outside.txt"):
            with pytest.raises(OperationError) as err:
                controller.fetch_artifact("ue1", bad, dest / "x")
            assert err.value.field == "params.name", bad
        with pytest.raises(OperationError) as err:
            controller.fetch_artifact("ue1", "sneaky", dest / "x")
        assert err.value.field == "params.name" and "outside artifact_dir" in str(err.value)
        with pytest.raises(OperationError) as err:
            controller.fetch_artifact("ue1", "nope.pcap", dest / "x")
        assert "probe/trace.bin" in (err.value.allowed or [])
        with pytest.raises(OperationError) as err:
            controller.request("ue1", "read_artifact", {"name": "empty.log", "length_bytes": 10**9})
        assert err.value.field == "params.length_bytes"
        # Failed fetches leave nothing behind, and a finished file is never replaced by a partial one.
        assert sorted(p.name for p in dest.iterdir()) == ["e.log", "trace.bin"]
        assert agents["ue1"].artifact_dir == art


def test_telemetry_reaches_subscribers(tmp_path: Path) -> None:
    with lab_bus(tmp_path, {"att1": DemoAgent}, telemetry=True) as (controller, agents):
        got: list[tuple[str, str, dict]] = []
        seen = threading.Event()

        def on_sample(agent: str, topic: str, data: dict) -> None:
            got.append((agent, topic, data))
            seen.set()

        controller.subscribe(on_sample)
        deadline = time.monotonic() + 5
        # PUB/SUB drops samples sent before the subscription is connected: send until one lands.
        while not seen.is_set() and time.monotonic() < deadline:
            agents["att1"].publish("attenuation", {"db": 31.5})
            seen.wait(0.05)
        assert got, "no telemetry arrived"
        agent, topic, data = got[0]
        assert (agent, topic, data["db"]) == ("att1", "attenuation", 31.5)
        assert abs(data["agent_time_s"] - time.time()) < 5


def test_generate_keypair_modes_and_loading(tmp_path: Path) -> None:
    keys_dir = tmp_path / "keys"
    public, secret = generate_keypair(keys_dir, "ue1")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert stat.S_IMODE(keys_dir.stat().st_mode) == 0o700
    pub_key, sec_key = load_secret_key(secret)
    assert load_public_key(public) == pub_key and len(sec_key) == 40
    assert "secret-key" not in public.read_text()
    with pytest.raises(InputError) as err:
        generate_keypair(keys_dir, "ue1")
    assert "exists" in str(err.value)
    public2, _ = generate_keypair(keys_dir, "ue1", overwrite=True)
    assert load_public_key(public2) != pub_key
    with pytest.raises(InputError) as err:
        generate_keypair(keys_dir, "../evil")
    assert "name" in str(err.value)


def test_keys_command(tmp_path: Path) -> None:
    runner = CliRunner()
    result = runner.invoke(keys_app, ["controller", "--dir", str(tmp_path / "k")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "k" / "controller.key").is_file()
    assert stat.S_IMODE((tmp_path / "k" / "controller.key_secret").stat().st_mode) == 0o600
    again = runner.invoke(keys_app, ["controller", "--dir", str(tmp_path / "k")])
    assert again.exit_code == 2 and "--force" in again.output
    forced = runner.invoke(keys_app, ["controller", "--dir", str(tmp_path / "k"), "--force"])
    assert forced.exit_code == 0


def test_keys_command_mounted_as_cellab_keys(tmp_path: Path) -> None:
    import typer

    app = typer.Typer()
    app.command("run")(lambda: None)
    app.add_typer(keys_app, name="keys", help="Make CURVE key pairs.")  # how cellab/cli.py mounts it
    result = CliRunner().invoke(app, ["keys", "enb1", "--dir", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "enb1.key").is_file() and (tmp_path / "enb1.key_secret").is_file()
    direct = typer.Typer()
    direct.command("run")(lambda: None)
    direct.command("keys")(keys_command)
    result = CliRunner().invoke(direct, ["keys", "--dir", str(tmp_path), "core1"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "core1.key").is_file()
