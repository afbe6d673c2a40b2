"""`cellab agent install`: the systemd unit, line by line, in a scratch root; the agent started from the unit's
exact ExecStart line reaches the controller and its telemetry arrives without --telemetry being given; the
role's user and capabilities; the key checks; the telemetry endpoint an agent derives from its controller's."""

from __future__ import annotations

import os
import pwd
import shlex
import shutil
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer

from cellab.inventory.agent_install import AgentCommand, derive_telemetry, enable_unit, render_unit, resolve_telemetry
from cellab.bus.controller import Controller
from cellab.bus.testing import TEST_HEARTBEAT_S, TEST_LOST_S, KeySet, make_keys
from cellab.errors import CellabError, InputError
from cellab.testkit.helpers import cellab_in_process, free_port

CELLAB = str(Path(sys.executable).parent / "cellab")  # the venv's, as the unit names it
ME = pwd.getpwuid(os.getuid()).pw_name


@dataclass
class Result:
    returncode: int
    stdout: str
    stderr: str


def install(capsys, *args: str) -> Result:
    """`cellab agent install ARGS` in this process (as main() runs it: a refusal exits 2)."""
    return Result(*cellab_in_process(capsys, "agent", "install", *args))


def unit_lines(root: Path, name: str) -> list[str]:
    return (root / "etc" / "systemd" / "system" / f"cellab-agent-{name}.service").read_text().splitlines()


def exec_start(lines: list[str]) -> list[str]:
    [line] = [line for line in lines if line.startswith("ExecStart=")]
    return shlex.split(line.removeprefix("ExecStart="))


def test_the_unit_line_by_line(capsys, tmp_path):
    keys = make_keys(tmp_path / "keys", ["atten1"])
    root, artifacts = tmp_path / "root", tmp_path / "artifacts"
    result = install(capsys, "--role", "attenuator", "--name", "atten1", "--controller", "tcp://10.0.0.1:7700",
                     "--key", str(keys.agents["atten1"][1]), "--controller-key", str(keys.controller_public),
                     "--user", ME, "--root", str(root), "--artifact-dir", str(artifacts))
    assert result.returncode == 0, result.stdout + result.stderr
    assert "telemetry tcp://10.0.0.1:7701" in result.stdout
    assert "systemctl daemon-reload && systemctl enable --now cellab-agent-atten1.service" in result.stdout
    lines = unit_lines(root, "atten1")
    argv = [CELLAB, "agent", "--role", "attenuator", "--kind", "any", "--name", "atten1",
            "--controller", "tcp://10.0.0.1:7700", "--telemetry", "tcp://10.0.0.1:7701",
            "--key", str(keys.agents["atten1"][1]), "--controller-key", str(keys.controller_public),
            "--artifact-dir", str(artifacts)]
    assert exec_start(lines) == argv
    body = [line for line in lines if not line.startswith("#")]  # the comments say who runs it and why
    assert body == [
        "[Unit]",
        "Description=cellab agent atten1 (role attenuator, kind any)",
        "Wants=network-online.target",
        "After=network-online.target time-sync.target",
        "",
        "[Service]",
        "Type=simple",
        f"User={ME}",
        "SupplementaryGroups=dialout",
        "Environment=PYTHONUNBUFFERED=1",
        f"ExecStart={shlex.join(argv)}",
        "KillSignal=SIGTERM",
        "TimeoutStopSec=45",
        "Restart=on-failure",
        "RestartSec=5",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
    ]
    assert any("dialout" in line for line in lines if line.startswith("#"))
    # the ExecStart arguments are exactly what `cellab agent` parses
    from cellab.cli import app

    group = typer.main.get_command(app).commands["agent"]  # type: ignore[attr-defined]
    ctx = group.make_context("agent", argv[2:])
    assert ctx.params | {"controller_key": list(ctx.params["controller_key"])} == {
        "role": "attenuator", "kind": "any", "name": "atten1", "controller": "tcp://10.0.0.1:7700",
        "telemetry": "tcp://10.0.0.1:7701", "key": keys.agents["atten1"][1],
        "controller_key": [keys.controller_public], "netns": None, "artifact_dir": artifacts, "cell_ctl": None,
        "cell_ue": 0, "serial": None, "adb_port": None, "srsran_bin": None}
    if shutil.which("systemd-analyze"):
        unit_file = root / "etc/systemd/system/cellab-agent-atten1.service"
        verify = subprocess.run(["systemd-analyze", "verify", str(unit_file)], capture_output=True, text=True,
                                timeout=60)
        assert verify.returncode == 0, verify.stdout + verify.stderr


def test_each_role_runs_as_its_user_with_its_capabilities(capsys, tmp_path):
    keys = make_keys(tmp_path / "keys", ["server1", "phone1", "enb1", "core1"])
    root = tmp_path / "root"

    def unit(name: str, role: str, *extra: str) -> list[str]:
        result = install(capsys, "--role", role, "--name", name, "--controller", "tcp://192.0.2.1:7700", "--key",
                         str(keys.agents[name][1]), "--controller-key", str(keys.controller_public),
                         "--root", str(root), *extra)
        assert result.returncode == 0, result.stdout + result.stderr
        return unit_lines(root, name)

    caps = "CAP_NET_ADMIN CAP_BPF CAP_SYS_ADMIN CAP_NET_RAW"
    server = unit("server1", "server", "--user", "edge-user")  # a user of the image being prepared
    assert "User=edge-user" in server and f"AmbientCapabilities={caps}" in server
    assert f"CapabilityBoundingSet={caps}" in server and "LimitMEMLOCK=infinity" in server
    assert "StateDirectory=cellab/agents/server1" in server  # the default artifact folder, made by systemd
    assert exec_start(server)[-2:] == ["--artifact-dir", "/var/lib/cellab/agents/server1"]
    as_root = unit("server1", "server")
    assert "User=root" in as_root and not any(line.startswith("AmbientCapabilities") for line in as_root)
    phone = unit("phone1", "ue", "--kind", "android", "--serial", "2A191FDH3001JD", "--user", "labuser")
    assert "User=labuser" in phone and "SupplementaryGroups=plugdev" in phone
    assert exec_start(phone)[exec_start(phone).index("--serial") + 1] == "2A191FDH3001JD"
    enb = unit("enb1", "enb", "--srsran-bin", "/opt/srsran/bin", "--env", "UHD_IMAGES_DIR=/usr/share/uhd/images")
    assert "User=root" in enb and "LimitRTPRIO=infinity" in enb
    assert 'Environment="UHD_IMAGES_DIR=/usr/share/uhd/images"' in enb
    assert "User=root" in unit("core1", "core")
    for role, name in (("enb", "enb1"), ("core", "core1")):
        refused = install(capsys, "--role", role, "--name", name, "--controller", "tcp://192.0.2.1:7700", "--key",
                          str(keys.agents[name][1]), "--controller-key", str(keys.controller_public),
                          "--root", str(root), "--user", "labuser")
        assert refused.returncode == 2 and f"the {role} agent runs as root" in refused.stderr


def test_keys_and_values_are_checked_before_anything_is_written(capsys, tmp_path):
    keys = make_keys(tmp_path / "keys", ["atten1"])
    secret = keys.agents["atten1"][1]
    root = tmp_path / "root"
    base = ["--role", "attenuator", "--name", "atten1", "--controller", "tcp://192.0.2.1:7700", "--root", str(root),
            "--user", ME]

    def refused(*args: str) -> str:
        result = install(capsys, *base, *args)
        assert result.returncode == 2, result.stdout + result.stderr
        assert "Traceback" not in result.stderr and not root.exists()
        return " ".join(result.stderr.split())

    good = ["--key", str(secret), "--controller-key", str(keys.controller_public)]
    os.chmod(secret, 0o644)
    assert "readable by others" in refused(*good)
    os.chmod(secret, 0o600)
    assert "secret key" in refused("--key", str(secret), "--controller-key", str(keys.controller_secret))
    assert "key file not found" in refused("--key", str(tmp_path / "nope.key_secret"), "--controller-key",
                                           str(keys.controller_public))
    assert "secret-key is missing" in refused("--key", str(keys.agents["atten1"][0]), "--controller-key",
                                              str(keys.controller_public))
    assert "systemd would expand" in refused(*good, "--artifact-dir", str(tmp_path / "a%h"))
    assert "not KEY=VALUE" in refused(*good, "--env", "NOEQUALS")
    assert "--telemetry" in refused(*good[:-2], "--controller-key", str(keys.controller_public),
                                    "--controller", "ipc:///tmp/x")  # nothing to derive a telemetry endpoint from
    assert "not with --dry-run or --root" in refused(*good, "--enable")
    dry = install(capsys, *base, *good, "--dry-run")
    assert dry.returncode == 0 and "ExecStart=" in dry.stdout and not root.exists()


def test_telemetry_off_is_written_and_warned(capsys, tmp_path):
    keys = make_keys(tmp_path / "keys", ["atten1"])
    root = tmp_path / "root"
    result = install(capsys, "--role", "attenuator", "--name", "atten1", "--controller", "tcp://192.0.2.1:7700",
                     "--key", str(keys.agents["atten1"][1]), "--controller-key", str(keys.controller_public), "--root",
                     str(root), "--user", ME, "--telemetry", "off")
    assert result.returncode == 0, result.stderr
    assert "telemetry is off" in result.stderr
    argv = exec_start(unit_lines(root, "atten1"))
    assert argv[argv.index("--telemetry") + 1] == "off"


def test_enable_runs_systemctl_as_argv_lists_and_stops_at_a_failure(tmp_path):
    keys = make_keys(tmp_path / "keys", ["atten1"])
    command = AgentCommand(role="attenuator", name="atten1", controller="tcp://192.0.2.1:7700",
                           key=keys.agents["atten1"][1], controller_keys=[keys.controller_public], kind="any",
                           telemetry="tcp://192.0.2.1:7701")
    unit = render_unit(command, CELLAB, ME)
    calls: list[list[str]] = []

    def fake_run(argv: list[str], **kwargs: object) -> subprocess.CompletedProcess:
        assert "shell" not in kwargs and isinstance(argv, list)
        calls.append(argv)
        return subprocess.CompletedProcess(argv, 0 if argv[1] == "daemon-reload" else 1, "", "Access denied")

    with pytest.raises(CellabError, match="systemctl enable --now cellab-agent-atten1.service failed .1.: Access denied"):
        enable_unit(unit, fake_run)
    assert calls == [["systemctl", "daemon-reload"], ["systemctl", "enable", "--now", "cellab-agent-atten1.service"]]


def test_the_telemetry_endpoint_is_derived_from_the_controller():
    assert derive_telemetry("tcp://10.0.0.1:7700") == "tcp://10.0.0.1:7701"
    assert derive_telemetry("tcp://[fd00::1]:9000") == "tcp://[fd00::1]:9001"
    assert resolve_telemetry("tcp://h:7700", None) == "tcp://h:7701"
    assert resolve_telemetry("tcp://h:7700", "off") is None
    assert resolve_telemetry("tcp://h:7700", "tcp://other:8000") == "tcp://other:8000"
    for bad in ("ipc:///run/c.sock", "tcp://h:*", "tcp://h:65535"):
        with pytest.raises(InputError, match="--telemetry off"):
            derive_telemetry(bad)


# ------------------------------------------------------------------ the unit's command, run
def controller_on_consecutive_ports(keys: KeySet) -> tuple[Controller, int]:
    """A CURVE controller bound to PORT and its telemetry to PORT + 1, as a lab's 7700/7701."""
    for _ in range(50):
        port = free_port()
        try:
            controller = Controller(f"tcp://127.0.0.1:{port}", telemetry_endpoint=f"tcp://127.0.0.1:{port + 1}",
                                    secret_key_file=keys.controller_secret,
                                    allowed_agent_keys=keys.agent_public_keys(), heartbeat_s=TEST_HEARTBEAT_S,
                                    agent_lost_s=TEST_LOST_S)
        except Exception:  # noqa: BLE001 - port + 1 taken: another pair
            continue
        return controller, port
    raise AssertionError("no two consecutive free ports")


def wait_listening(port: int, proc: subprocess.Popen, timeout_s: float = 30) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        assert proc.poll() is None, "the attenuator emulator exited"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise AssertionError(f"nothing listens on port {port}")


def test_the_agent_started_from_the_unit_sends_telemetry(capsys, tmp_path):
    """The unit's ExecStart, run as is (no --telemetry given to install), and a plain `cellab agent` without
    --telemetry: both agents' samples reach the controller's telemetry socket (port + 1)."""
    keys = make_keys(tmp_path / "keys", ["atten1", "atten2", "atten3"])
    controller, port = controller_on_consecutive_ports(keys)
    samples: list[tuple[str, str, dict]] = []
    arrived = threading.Condition()

    def on_sample(agent: str, topic: str, data: dict) -> None:
        with arrived:
            samples.append((agent, topic, data))
            arrived.notify_all()

    controller.subscribe(on_sample)
    box_port = free_port()
    procs: list[subprocess.Popen] = []
    try:
        emulator = subprocess.Popen([CELLAB, "atten", "emulate", "minicircuits", "--transport", "http", "--port",
                                     str(box_port)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(emulator)
        root = tmp_path / "root"
        result = install(capsys, "--role", "attenuator", "--name", "atten1", "--controller", f"tcp://127.0.0.1:{port}",
                         "--key", str(keys.agents["atten1"][1]), "--controller-key", str(keys.controller_public),
                         "--user", ME, "--root", str(root), "--artifact-dir", str(tmp_path / "artifacts1"))
        assert result.returncode == 0, result.stdout + result.stderr
        from_unit = exec_start(unit_lines(root, "atten1"))
        assert from_unit[0] == CELLAB
        plain = [CELLAB, "agent", "--role", "attenuator", "--name", "atten2", "--controller",
                 f"tcp://127.0.0.1:{port}", "--key", str(keys.agents["atten2"][1]), "--controller-key",
                 str(keys.controller_public), "--artifact-dir", str(tmp_path / "artifacts2")]
        off = [*plain[:5], "atten3", *plain[6:8], "--key", str(keys.agents["atten3"][1]), *plain[10:12],
               "--artifact-dir", str(tmp_path / "artifacts3"), "--telemetry", "off"]
        for argv in (from_unit, plain, off):
            procs.append(subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
        wait_listening(box_port, emulator)
        controller.wait_for_agents(["atten1", "atten2", "atten3"], timeout_s=60)
        box = {"name": "box1", "model": "minicircuits-rcdat", "transport": "http",  # the emulator's RCDAT-6000-110
               "address": f"http://127.0.0.1:{box_port}", "channels": 1, "max_db": 60}
        for name in ("atten1", "atten2", "atten3"):
            controller.request(name, "configure", {"attenuators": [box]}, timeout_s=30)
        deadline = time.monotonic() + 30
        db = 10.0
        while time.monotonic() < deadline:  # PUB/SUB drops what is sent before the subscription is up: retry
            for name in ("atten1", "atten2", "atten3"):
                controller.request(name, "set", {"attenuator": "box1", "channel": 1, "db": db}, timeout_s=30)
            with arrived:
                arrived.wait_for(lambda: {"atten1", "atten2"} <= {s[0] for s in samples}, timeout=1.0)
                if {"atten1", "atten2"} <= {s[0] for s in samples}:
                    break
            db += 0.25
        got = {(agent, topic) for agent, topic, _ in samples}
        assert ("atten1", "attenuation") in got, got  # the unit's agent
        assert ("atten2", "attenuation") in got, got  # derived at run time from --controller
        assert "atten3" not in {agent for agent, _ in got}
    finally:
        for proc in reversed(procs):
            proc.terminate()
        outputs = []
        for proc in procs:
            try:
                outputs.append(proc.communicate(timeout=45))
            except subprocess.TimeoutExpired:
                proc.kill()
                outputs.append(proc.communicate())
        controller.close()
    assert "telemetry is off" in " ".join(outputs[3][1].split())
    assert "telemetry is off" not in outputs[1][1] + outputs[2][1]
