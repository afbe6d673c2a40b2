"""What a run depended on, for its manifest: enough to run it again and to know what changed.

cellab's commit (and whether the checkout had changes), Python, the kernel and iperf3; the built programs the
run used (`build/bin/*`) and each server module's BPF object, by hash; the lab's own software (srsRAN and EPC
binaries, by hash and version where the lab says); every file the run's parameters and schedules name
(traces, schedule files, drive logs, calibrations), by hash; and the server namespace's TCP sysctls.
Hashes are cached by (path, size, mtime), so a campaign pays for each file once.
"""

from __future__ import annotations

import hashlib
import platform
import shutil
import subprocess
from pathlib import Path
from typing import Any

import cellab
from cellab.paths import find_program

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "build"
PROGRAMS = ("cellab-cell", "cellab-probe", "cellab-send", "cellab-modules", "cellab-flowstat", "cellab-zmq-broker")
TCP_SYSCTLS = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max",
               "net.core.wmem_max", "net.ipv4.tcp_ecn", "net.ipv4.tcp_no_metrics_save", "net.core.default_qdisc")
_hashes: dict[tuple[str, int, int], str] = {}


def file_hash(path: str | Path) -> str | None:
    """sha256 of a file (None when it cannot be read)."""
    path = Path(path)
    try:
        st = path.stat()
        key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
        if key not in _hashes:
            digest = hashlib.sha256()
            with open(path, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    digest.update(block)
            _hashes[key] = digest.hexdigest()
        return _hashes[key]
    except OSError:
        return None


def _git(*args: str) -> str | None:
    if not (REPO / ".git").exists() or not shutil.which("git"):
        return None
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


_software: dict[str, Any] | None = None


def software_versions() -> dict[str, Any]:
    """cellab (version, commit, local changes), Python, the kernel, iperf3: once per process."""
    global _software
    if _software is None:
        versions: dict[str, Any] = {"cellab": cellab.__version__, "python": platform.python_version(),
                                    "kernel": platform.release()}
        commit = _git("rev-parse", "HEAD")
        if commit:
            versions["cellab_commit"] = commit
            versions["cellab_local_changes"] = bool(_git("status", "--porcelain", "--untracked-files=no"))
        if shutil.which("iperf3"):
            out = subprocess.run(["iperf3", "--version"], capture_output=True, text=True, check=False).stdout
            versions["iperf3"] = out.splitlines()[0] if out else "unknown"
        _software = versions
    return dict(_software)


def programs() -> dict[str, str]:
    """The built programs, by hash (a rebuilt program changes its hash)."""
    out = {}
    for name in PROGRAMS:
        try:
            digest = file_hash(find_program(name))
        except Exception:  # noqa: BLE001 - a program this install lacks is simply not listed
            continue
        if digest:
            out[name] = digest
    return out


def module_objects(names: set[str]) -> dict[str, str]:
    """Each registered server module's BPF object (its skeleton embeds it), by hash."""
    out = {}
    for name in sorted(names):
        digest = file_hash(BUILD / "server-modules" / f"{name}.skel.h")
        if digest:
            out[name] = digest
    return out


def named_files(params: dict[str, Any], schedules: dict[str, Any]) -> dict[str, str | None]:
    """Every file the run's parameters and schedules name, by hash (None: missing now)."""
    from cellab.campaign.model import PATH_PARAMS

    paths = [params[k] for k in PATH_PARAMS if isinstance(params.get(k), str)]
    for spec in schedules.values():
        for key in ("file", "drive_log", "calibration"):
            value = getattr(spec, key, None)
            if isinstance(value, str) and value != "auto":
                paths.append(value)
    return {p: file_hash(p) for p in paths}


def sysctls(netns: str | None) -> dict[str, str]:
    """The TCP sysctls the server's flows see (its network namespace's own)."""
    argv = ["sysctl", "-e", *TCP_SYSCTLS]  # -e: a key this namespace lacks is left out, not an error
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=10)
    found = (line.partition(" = ") for line in done.stdout.splitlines())
    return {key: " ".join(value.split()) for key, sep, value in found if sep and key in TCP_SYSCTLS}


def run_provenance(session: Any, params: dict[str, Any], schedules: dict[str, Any]) -> dict[str, Any]:
    """The manifest's `provenance`: programs, modules, the lab's own software, named files, sysctls."""
    from cellab.labs.base import EmbeddedLab

    lab_own = getattr(session.lab, "provenance", None)
    server = session.topology.server if session.topology else None
    embedded = isinstance(session.lab, EmbeddedLab)  # an inventory's server is another host: its agent knows
    return {
        "programs": programs(),
        "module_objects": module_objects(set(session.loaded_modules)),
        "lab_software": lab_own() if callable(lab_own) else {},
        "files": named_files(params, schedules),
        "server_sysctls": sysctls(server.netns if server is not None and server.netns else None) if embedded else {},
    }
