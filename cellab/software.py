"""What software a host runs, by hash and by the version it prints: for a run's provenance.

Every agent answers the bus's `provenance` operation with `host_record()` and its own part (the programs its
role runs); the controller adds its own side (cellab.results.provenance). A program is named by the sha256 of
its file; a running process by the sha256 of the file the kernel executed (`/proc/PID/exe`: the binary that
runs, even when the file on disk was replaced since), so a rebuilt srsenb or daemon shows as a new hash.
Hashes are cached by (path, size, mtime): a campaign pays for each file once.
"""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import socket
import stat
import subprocess
from pathlib import Path
from typing import Any

import cellab

REPO = Path(__file__).resolve().parents[1]
#: the TCP settings a server's flows see (read in its network namespace: each namespace has its own)
TCP_SYSCTLS = ("net.ipv4.tcp_congestion_control", "net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem", "net.core.rmem_max",
               "net.core.wmem_max", "net.ipv4.tcp_ecn", "net.ipv4.tcp_no_metrics_save", "net.core.default_qdisc",
               "net.ipv4.tcp_sack", "net.ipv4.tcp_timestamps", "net.ipv4.tcp_slow_start_after_idle")
VERSION_TIMEOUT_S = 5.0
_hashes: dict[tuple[str, int, int], str] = {}
_versions: dict[tuple[str, str], str] = {}
_VERSION_WORD = re.compile(r"\b[vV]?(?:ersion\s+)?v?([0-9]+\.[0-9]+(?:\.[0-9]+)?[0-9A-Za-z.+~-]*)")


def file_hash(path: str | Path) -> str | None:
    """sha256 of a file (None when it cannot be read)."""
    path = Path(path)
    try:
        st = path.stat()
        if not stat.S_ISREG(st.st_mode):  # a device or a FIFO: no content to hash (/dev/zero never ends)
            return None
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


def printed_version(path: str | Path, argv_tail: tuple[str, ...] = ("--version",), env: dict[str, str] | None = None
                    ) -> str:
    """The version a program prints for `argv_tail` (its first version-looking word: '23.4.0', '3.12'), '' when
    it prints none; asked once per (program file, hash)."""
    key = (str(path), file_hash(path) or "")
    if key not in _versions:
        try:
            done = subprocess.run([str(path), *argv_tail], capture_output=True, text=True, timeout=VERSION_TIMEOUT_S,
                                  check=False, env=env, stdin=subprocess.DEVNULL)
            match = _VERSION_WORD.search(done.stdout + "\n" + done.stderr)
            _versions[key] = match.group(1).rstrip(".") if match else ""
        except (OSError, subprocess.SubprocessError):
            _versions[key] = ""
    return _versions[key]


def program_record(path: str | Path, version_argv: tuple[str, ...] | None = ("--version",),
                   env: dict[str, str] | None = None) -> dict[str, Any]:
    """{path, sha256, version} of a program file (version: what it prints; none asked when version_argv is None)."""
    record: dict[str, Any] = {"path": str(path), "sha256": file_hash(path)}
    if version_argv is not None and record["sha256"]:
        record["version"] = printed_version(path, version_argv, env)
    return record


def which_record(name: str, version_argv: tuple[str, ...] | None = ("--version",)) -> dict[str, Any] | None:
    """program_record of a program on PATH (None when it is not installed)."""
    found = shutil.which(name)
    return program_record(found, version_argv) if found else None


def process_record(pid: int | None) -> dict[str, Any] | None:
    """The binary a running process executes: {path, sha256, replaced_on_disk}; None when it is gone.
    `replaced_on_disk`: the file at its path now is another (rebuilt or deleted since the process started)."""
    if not pid:
        return None
    exe = Path(f"/proc/{pid}/exe")
    try:
        target = os.readlink(exe)
    except OSError:
        return None
    running = file_hash(exe)  # the kernel's own reference: the executed file even when unlinked
    if running is None:
        return None
    path = target.removesuffix(" (deleted)")
    return {"path": path, "sha256": running, "replaced_on_disk": target.endswith(" (deleted)") or
            file_hash(path) != running}


def _git(*args: str) -> str | None:
    if not (REPO / ".git").exists() or not shutil.which("git"):
        return None
    done = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=False)
    return done.stdout.strip() if done.returncode == 0 else None


_host: dict[str, Any] | None = None


def host_record() -> dict[str, Any]:
    """cellab (version, commit and local changes of this checkout), Python, the kernel (release and build), the
    host name: once per process."""
    global _host
    if _host is None:
        record: dict[str, Any] = {"cellab": cellab.__version__, "python": platform.python_version(),
                                  "kernel": platform.release(), "kernel_build": platform.version(),
                                  "machine": platform.machine(), "host": socket.gethostname()}
        commit = _git("rev-parse", "HEAD")
        if commit:
            record["cellab_commit"] = commit
            record["cellab_local_changes"] = bool(_git("status", "--porcelain", "--untracked-files=no"))
        _host = record
    return dict(_host)


def sysctls(netns: str | None, keys: tuple[str, ...] = TCP_SYSCTLS) -> dict[str, str]:
    """The sysctls as a process in `netns` (None: this namespace) sees them; a key the kernel lacks is left out."""
    argv = ["sysctl", "-e", *keys]
    if netns:
        argv = ["ip", "netns", "exec", netns, *argv]
    try:
        done = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return {}
    found = (line.partition(" = ") for line in done.stdout.splitlines())
    return {key: " ".join(value.split()) for key, sep, value in found if sep and key in keys}
