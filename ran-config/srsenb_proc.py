"""One srsenb process: found on disk, started on rendered configs with stdin as a pipe, its console
scanned for the ready line and for its own error lines, stopped politely then firmly.

argv is a list (never a shell); stdin takes only the commands this module builds.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import threading
import time
from pathlib import Path

from cellab.errors import CellabError, InputError

from .logbound import older

READY_LINE = "==== eNodeB started ==="
# srsenb's console lines that say why it stops on a bad config or a failed start
_ERROR_RE = re.compile(r"^(error|invalid|failed|couldn't|cannot|could not|\[\d+\]\[.*\] parser error)", re.I)
BIN_ENV = "CELLAB_SRSRAN_BIN"  # a folder holding srsenb (e.g. ../shared/tools/srsran/bin)
SHIM_NAME = "sctpshim.so"


class SrsenbError(CellabError):
    """srsenb could not be found, started, or exited; the message carries its own error line."""


def find_srsenb(configured: str | Path | None = None) -> Path:
    """The srsenb binary: the configured path (inventory), else $CELLAB_SRSRAN_BIN/srsenb, else PATH."""
    searched: list[str] = []
    candidates: list[Path] = []
    if configured:
        candidates.append(Path(configured))
    if os.environ.get(BIN_ENV):
        candidates.append(Path(os.environ[BIN_ENV]) / "srsenb")
    for cand in candidates:
        searched.append(str(cand))
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand.resolve()
    on_path = shutil.which("srsenb")
    searched.append(f"PATH ({os.environ.get('PATH', '')})")
    if on_path:
        return Path(on_path).resolve()
    raise SrsenbError("srsenb not found; searched: " + "; ".join(searched)
                      + f" (set the inventory's srsenb path, {BIN_ENV}, or install srsRAN 4G)")


def kernel_has_sctp() -> bool:
    return Path("/proc/net/sctp").exists()


def sctp_shim_for(binary: Path) -> Path | None:
    """A bundle's LD_PRELOAD SCTP shim (BUNDLE/lib/sctpshim.so next to BUNDLE/bin), when the kernel lacks SCTP."""
    shim = binary.parent.parent / "lib" / SHIM_NAME
    return shim if shim.is_file() and not kernel_has_sctp() else None


class SrsenbProcess:
    def __init__(self, binary: Path, config_dir: Path, console_path: Path, *, preload: Path | None = None,
                 netns: str | None = None, console_max_bytes: int = 0):
        """console_max_bytes: the console file with its older half (NAME.1) within this (0: no bound)."""
        self.binary, self.config_dir, self.console_path = binary, config_dir, console_path
        self.console_max_bytes = console_max_bytes
        self.preload, self.netns = preload, netns
        self.proc: subprocess.Popen[bytes] | None = None
        self.ready = threading.Event()
        self.exited = threading.Event()
        self.error_lines: list[str] = []
        self.started_s: float | None = None
        self._lines_lock = threading.Lock()
        self._stdin_lock = threading.Lock()
        self._reader: threading.Thread | None = None
        self._killed_by_us = False

    def start(self) -> None:
        argv = [str(self.binary), str(self.config_dir / "enb.conf")]
        if self.netns:
            argv = ["ip", "netns", "exec", self.netns, *argv]
        env = dict(os.environ)
        if self.preload:
            env["LD_PRELOAD"] = str(self.preload)
        self.console_path.parent.mkdir(parents=True, exist_ok=True)
        self.proc = subprocess.Popen(argv, cwd=self.config_dir, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, env=env, start_new_session=True)
        self.started_s = time.time()
        self._reader = threading.Thread(target=self._read_console, name="srsenb-console", daemon=True)
        self._reader.start()

    def _read_console(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        log = open(self.console_path, "ab")
        try:
            for raw in iter(self.proc.stdout.readline, b""):
                if self.console_max_bytes and log.tell() + len(raw) > self.console_max_bytes // 2:
                    log.close()  # as the agent's other files (logbound.append_bounded): NAME.1, then a new NAME
                    self.console_path.replace(older(self.console_path))
                    log = open(self.console_path, "ab")
                log.write(raw)
                log.flush()
                line = raw.decode(errors="replace").strip()
                if line.startswith(READY_LINE):
                    self.ready.set()
                elif _ERROR_RE.match(line) and "Attempting reconnection" not in line:
                    with self._lines_lock:
                        self.error_lines.append(line)
        finally:
            log.close()
        self.proc.wait()
        self.exited.set()

    # ----- state ---------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    @property
    def returncode(self) -> int | None:
        return self.proc.poll() if self.proc else None

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def crashed(self) -> bool:
        """Exited without being stopped by us (a signal or an error exit)."""
        return self.returncode is not None and not self._killed_by_us

    def error_line(self) -> str | None:
        with self._lines_lock:
            return self.error_lines[0] if self.error_lines else None

    def exit_reason(self) -> str:
        code = self.returncode
        how = f"killed by {signal.Signals(-code).name}" if code is not None and code < 0 else f"exit code {code}"
        line = self.error_line()
        return f"srsenb exited ({how})" + (f": {line}" if line else f"; console: {self.console_path}")

    def wait_ready(self, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ready.wait(0.05):
                return
            if self.exited.is_set() or (self.proc is not None and self.proc.poll() is not None):
                self.exited.wait(2)  # let the reader take the last lines
                raise SrsenbError(self.exit_reason())
        raise SrsenbError(f"srsenb did not print {READY_LINE!r} within {timeout_s:g} s"
                          + (f": {self.error_line()}" if self.error_line() else f"; console: {self.console_path}"))

    # ----- control -------------------------------------------------------------------------------
    def command(self, line: str) -> None:
        """One stdin command (built by the caller from validated values)."""
        if not self.running():
            raise SrsenbError(f"srsenb is not running: cannot send {line.split()[0]!r}")
        assert self.proc is not None and self.proc.stdin is not None
        with self._stdin_lock:
            try:
                self.proc.stdin.write(line.encode() + b"\n")
                self.proc.stdin.flush()
            except BrokenPipeError:
                raise SrsenbError(self.exit_reason()) from None

    def cell_gain(self, cell_id: int, gain_db: float) -> None:
        self.command(f"cell_gain {int(cell_id)} {float(gain_db):g}")

    def stop(self, grace_s: float = 8.0) -> int | None:
        """SIGTERM (srsenb stops its radio and exits, forcing itself after 5 s), SIGKILL after grace_s."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self._killed_by_us = True
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(5)
        if self._reader is not None:
            self._reader.join(timeout=5)
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except BrokenPipeError:
                pass
        return self.proc.returncode

    def kill(self) -> None:
        """SIGKILL at once (tests; a hung process)."""
        if self.proc is not None and self.proc.poll() is None:
            self._killed_by_us = True
            self._signal(signal.SIGKILL)
            self.proc.wait(5)
        if self._reader is not None:
            self._reader.join(timeout=5)

    def _signal(self, sig: int) -> None:
        assert self.proc is not None
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


# ----- the log level that shows the eNB's SR receptions -----------------------------------------------
# srsenb logs each decoded PUCCH (with its SR flag) from the PHY at info level; warning and above hide
# them. srsenb takes [log] phy_level, else all_level (srsenb main.cc).
SR_LOG_LEVELS = ("info", "debug")


def check_sr_log_level(level: str, source: str = "eNB agent", field: str = "sr_log_level") -> str:
    if level not in SR_LOG_LEVELS:
        raise InputError(source, field, f"{level!r} hides the eNB's SR receptions (srsenb logs each PUCCH's SR "
                         "flag at PHY info level)", allowed=SR_LOG_LEVELS)
    return level


def with_sr_log_level(enb_conf: str, level: str = "info") -> str:
    """enb.conf with [log] phy_level set so the PUCCH SR lines are logged (a lower all_level stays lower)."""
    check_sr_log_level(level)
    return with_log_level(enb_conf, "phy_level", level)


def with_log_level(enb_conf: str, key: str, level: str) -> str:
    """enb.conf with one layer's level in [log] (`key`: phy_level, s1ap_level, ...) set to `level`."""
    if not re.fullmatch(r"[a-z0-9]+_level", key) or level not in ("debug", "info", "warning", "error", "none"):
        raise ValueError(f"[log] {key} = {level}: not a srsenb log level setting")
    return _with_log_setting(enb_conf, key, level)


def with_log_file_max_kib(enb_conf: str, kib: int) -> str:
    """enb.conf with srsenb's log split in files of `kib` KiB (-1: one file; cellab.ran.logbound)."""
    if isinstance(kib, bool) or not isinstance(kib, int) or not (kib == -1 or 4 <= kib < 1 << 31):
        raise ValueError(f"[log] file_max_size = {kib!r}: not a size in KiB (-1, or 4 and more)")
    return _with_log_setting(enb_conf, "file_max_size", str(kib))


def _with_log_setting(enb_conf: str, key: str, value: str) -> str:
    out, in_log, done = [], False, False
    for line in enb_conf.splitlines():
        head = line.strip()
        if head.startswith("["):
            if in_log and not done:
                out.append(f"{key} = {value}")
                done = True
            in_log = head == "[log]"
        elif in_log and re.match(rf"{key}\s*=", head):
            continue
        out.append(line)
    if not done:
        if not in_log:
            out.append("[log]")
        out.append(f"{key} = {value}")
    return "\n".join(out) + "\n"


def sr_log_level_of(enb_conf: str, source: str = "enb.conf") -> str:
    """The PHY log level an enb.conf gives srsenb; an InputError naming [log] phy_level when it hides SR."""
    levels, in_log = {}, False
    for line in enb_conf.splitlines():
        head = line.strip()
        if head.startswith("["):
            in_log = head == "[log]"
        elif in_log and (m := re.match(r"(phy_level|all_level)\s*=\s*(\w+)", head)):
            levels[m.group(1)] = m.group(2)
    level = levels.get("phy_level", levels.get("all_level", "info"))
    return check_sr_log_level(level, source, "[log] phy_level")
