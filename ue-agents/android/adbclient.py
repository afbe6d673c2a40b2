"""The real `adb` client, driven with argv lists: `adb -P PORT -s SERIAL shell WORD...`.

adb joins the words after `shell` with spaces and the phone's sh splits them again, so every word
is quoted (shlex.quote) and stays one word; the words come from typed, validated parameters only.
A phone that is not (or no longer) in `adb devices` raises PhoneGone naming it.
"""

from __future__ import annotations

import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from cellab.errors import CellabError, InputError

DEFAULT_PORT = 5037
SERIAL_PATTERN = re.compile(r"^[A-Za-z0-9._:-]{1,64}$")
# adb's own words for a missing phone (not a command's "not found" on the phone)
_GONE = re.compile(r"^error: (device '.*' not found|no devices/emulators found|device offline|closed)", re.M)


class PhoneError(CellabError):
    """A phone refused or failed a command; the message names the phone."""


class PhoneGone(PhoneError):
    """The phone is not connected (unplugged, rebooting, dropped by the server)."""


@dataclass(frozen=True)
class DeviceEntry:
    serial: str
    state: str
    model: str = ""
    transport_id: int | None = None


@dataclass(frozen=True)
class ShellResult:
    code: int
    stdout: str
    stderr: str


class Adb:
    def __init__(self, port: int | None = None, adb: str = "adb"):
        if shutil.which(adb) is None:
            raise CellabError(f"{adb}: the adb client is not installed (Debian package adb)")
        if port is None:  # the adb client's own default and override
            port = int(os.environ.get("ANDROID_ADB_SERVER_PORT") or DEFAULT_PORT)
        self.port, self.adb = int(port), adb

    def base(self) -> list[str]:
        return [self.adb, "-P", str(self.port)]

    def devices(self, timeout_s: float = 10) -> list[DeviceEntry]:
        done = self._run([*self.base(), "devices", "-l"], timeout_s, "adb devices")
        out = []
        for line in done.stdout.splitlines()[1:]:
            words = line.split()
            if len(words) < 2:
                continue
            extra = dict(w.split(":", 1) for w in words[2:] if ":" in w)
            tid = extra.get("transport_id")
            out.append(DeviceEntry(words[0], words[1], extra.get("model", ""),
                                   int(tid) if tid and tid.isdigit() else None))
        return out

    def check_serial(self, serial: str, source: str = "--serial") -> DeviceEntry:
        """A serial a person gave, checked against discovery (never taken from the wire)."""
        if not SERIAL_PATTERN.fullmatch(serial):
            raise InputError(source, "serial", f"{serial!r} is not a device serial",
                             ["1-64 of letters, digits, '.', '_', ':', '-'"])
        listed = self.devices()
        for entry in listed:
            if entry.serial == serial and entry.state == "device":
                return entry
        raise InputError(source, "serial", f"no phone {serial!r} on adb (port {self.port})",
                         [f"{e.serial} ({e.state})" for e in listed] or ["no phone connected"])

    def shell_argv(self, serial: str, words: list[str]) -> list[str]:
        return [*self.base(), "-s", serial, "shell", *(shlex.quote(w) for w in words)]

    def shell(self, serial: str, words: list[str], timeout_s: float = 30) -> ShellResult:
        done = self._run(self.shell_argv(serial, words), timeout_s, f"phone {serial}: {words[0]}")
        if done.returncode != 0:
            self._raise_if_gone(serial, done.stderr)
        return ShellResult(done.returncode, done.stdout, done.stderr)

    def popen_shell(self, serial: str, words: list[str], stdout: object) -> subprocess.Popen:
        return subprocess.Popen(self.shell_argv(serial, words), stdin=subprocess.DEVNULL, stdout=stdout,
                                stderr=subprocess.PIPE, text=True, start_new_session=True)

    def push(self, serial: str, local: Path, remote: str, timeout_s: float = 120) -> None:
        done = self._run([*self.base(), "-s", serial, "push", str(local), remote], timeout_s, f"phone {serial}: push")
        if done.returncode != 0:
            text = done.stderr + done.stdout  # adb prints some sync errors on stdout
            self._raise_if_gone(serial, text)
            raise PhoneError(f"phone {serial}: push {local.name} to {remote} failed: {text.strip()[-300:]}")

    def pull(self, serial: str, remote: str, local: Path, timeout_s: float = 120) -> None:
        local.parent.mkdir(parents=True, exist_ok=True)
        done = self._run([*self.base(), "-s", serial, "pull", remote, str(local)], timeout_s, f"phone {serial}: pull")
        if done.returncode != 0:
            text = done.stderr + done.stdout
            self._raise_if_gone(serial, text)
            raise PhoneError(f"phone {serial}: pull {remote} failed: {text.strip()[-300:]}")

    def present(self, serial: str) -> bool:
        try:
            return self._listed(serial, timeout_s=5)
        except CellabError:
            return False

    def _listed(self, serial: str, timeout_s: float) -> bool:
        """The phone in `adb devices` and usable; PhoneError when adb does not list in time."""
        return any(e.serial == serial and e.state == "device" for e in self.devices(timeout_s=timeout_s))

    def _raise_if_gone(self, serial: str, stderr: str) -> None:
        if _GONE.search(stderr):
            raise PhoneGone(f"phone {serial}: disconnected (adb: {stderr.strip()[-200:]})")
        try:  # a command that failed on a listed phone is the command's own failure, not a lost phone
            listed = self._listed(serial, timeout_s=15)
        except PhoneError:
            return  # a busy adb server that did not list in time says nothing about the phone (a loaded CI host)
        if not listed:
            raise PhoneGone(f"phone {serial}: disconnected (adb: {stderr.strip()[-200:] or 'connection lost'})")

    @staticmethod
    def _run(argv: list[str], timeout_s: float, what: str) -> subprocess.CompletedProcess:
        try:
            return subprocess.run(argv, capture_output=True, text=True, timeout=timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise PhoneError(f"{what}: no answer from adb within {timeout_s:g} s") from None
