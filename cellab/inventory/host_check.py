"""`cellab doctor`: what this host has and lacks, each with the action that fixes it."""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cellab.paths import BUILD_BIN


@dataclass
class Check:
    name: str
    status: str  # ok | missing | warn | none (optional hardware not present)
    detail: str
    required: bool = True


def _tool(name: str, why: str, required: bool = True) -> Check:
    path = shutil.which(name)
    if path:
        return Check(name, "ok", path, required)
    return Check(name, "missing", f"{why}: run `make setup` (Debian package)", required)


def _bpffs_mounted() -> bool:
    try:
        return any(line.split()[2] == "bpf" for line in Path("/proc/mounts").read_text().splitlines())
    except OSError:
        return False


def _phones() -> list[Check]:
    """One line per phone (model, Android, root, RSRP) from `cellab ue phones --json`: the ue room's
    command, run as a program because the core does not import rooms."""
    import json
    import sys

    checks = []
    for line in _run([sys.executable, "-m", "cellab", "ue", "phones", "--json"], timeout_s=60).splitlines():
        try:
            p = json.loads(line)
        except ValueError:
            continue
        if "error" in p or p.get("state") != "device":
            checks.append(Check(f"phone {p.get('serial')}", "warn", p.get("error", p.get("state", "?")), False))
            continue
        checks.append(Check(f"phone {p['serial']}", "ok", f"{p['model']}, Android {p['android']}, "
                            f"{'rooted' if p['rooted'] else 'not rooted'}, RSRP {p['rsrp_dbm']:g} dBm", False))
    return checks


def _adb_server_port() -> int:
    """The port the adb client talks to ($ANDROID_ADB_SERVER_PORT, else 5037), as the adb client picks it."""
    text = os.environ.get("ANDROID_ADB_SERVER_PORT", "")
    return int(text) if text.isdigit() and 0 < int(text) < 65536 else 5037


def _listening(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False


def _adb_checks() -> list[Check]:
    """The phones adb sees; an adb server this check had to start is stopped again (`adb kill-server`), so the
    doctor leaves the host as it found it (a server left running holds the phones' USB interfaces)."""
    port = _adb_server_port()
    running = _listening(port)
    try:
        lines = [line for line in _run(["adb", "-P", str(port), "devices"]).splitlines()[1:] if line.strip()]
        checks = [Check("adb devices", "ok" if lines else "none",
                        ", ".join(lines) if lines else "no phone attached (enable USB debugging, `adb devices`)",
                        required=False)]
        return checks + (_phones() if lines else [])
    finally:
        if not running:
            _run(["adb", "-P", str(port), "kill-server"])


def _run(argv: list[str], timeout_s: float = 10) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, check=False).stdout
    except (OSError, subprocess.TimeoutExpired):
        return ""


def run_checks() -> list[Check]:
    checks = [
        Check("root", "ok" if os.geteuid() == 0 else "missing",
              "namespaces, TUN and BPF need root" + ("" if os.geteuid() == 0 else ": run with sudo")),
        Check("BTF", "ok" if Path("/sys/kernel/btf/vmlinux").exists() else "missing",
              "/sys/kernel/btf/vmlinux" if Path("/sys/kernel/btf/vmlinux").exists()
              else "kernel without BTF: BPF congestion controls need CONFIG_DEBUG_INFO_BTF=y (kernel >= 6.0)"),
        Check("bpffs", "ok" if _bpffs_mounted() else "warn",
              "mounted" if _bpffs_mounted() else "not mounted; cellab mounts it at /sys/fs/bpf when loading modules"),
        Check("TUN", "ok" if Path("/dev/net/tun").exists() else "missing",
              "/dev/net/tun" if Path("/dev/net/tun").exists() else "no /dev/net/tun: the virtual cell needs the tun driver"),
        _tool("ip", "namespaces and links (iproute2)"),
        _tool("tc", "bottleneck queues (iproute2)"),
        _tool("iperf3", "the iperf3 workload"),
        _tool("ping", "RTT measurement (iputils-ping)"),
        _tool("tcpdump", "packet captures"),
        _tool("tshark", "capture analysis and benchmarks", required=False),
        _tool("clang", "building the BPF modules"),
        _tool("bpftool", "BPF skeletons and inspection"),
    ]
    for program in ("cellab-cell", "cellab-modules", "cellab-send", "cellab-probe"):
        path = BUILD_BIN / program
        checks.append(Check(program, "ok" if path.exists() else "warn",
                            str(path) if path.exists() else "not built: run `make build`", required=False))
    cc = Path("/proc/sys/net/ipv4/tcp_available_congestion_control")
    checks.append(Check("congestion controls", "ok" if cc.exists() else "warn",
                        cc.read_text().strip() if cc.exists() else "unknown", required=False))
    if shutil.which("adb"):
        checks += _adb_checks()
    else:
        checks.append(Check("adb devices", "none", "adb not installed (apt-get install adb) — only for Android UEs",
                            required=False))
    if shutil.which("uhd_find_devices"):
        out = _run(["uhd_find_devices"], timeout_s=20)
        found = "serial" in out
        checks.append(Check("UHD devices", "ok" if found else "none",
                            "USRP found" if found else "no USRP found (check USB 3 / Ethernet and `uhd_find_devices`)",
                            required=False))
    else:
        checks.append(Check("UHD devices", "none", "uhd-host not installed — only for a real eNB", required=False))
    return checks
