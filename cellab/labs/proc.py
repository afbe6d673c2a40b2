"""Programs an agent runs on its host: argv lists only (never a shell), optionally inside a namespace."""

from __future__ import annotations

import ctypes

import os
import signal
import subprocess
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Protocol

from cellab.labs.netns import in_netns


def die_with_parent() -> None:
    """preexec_fn: the child gets SIGTERM (its safe state first) when the thread that started it ends, even by
    kill -9 of its process: nothing of a dead controller or worker keeps running."""
    PR_SET_PDEATHSIG = 1
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


def argv_in(netns: str | None, argv: list[str]) -> list[str]:
    return in_netns(netns, argv) if netns else list(argv)


class ManagedProcess:
    """A child process with its output in a file; stop() is polite first (SIGTERM), then firm."""

    def __init__(self, argv: list[str], log_path: Path, netns: str | None = None, cwd: Path | None = None,
                 commands: bool = False):
        """cwd: where the program writes what it writes relative (srsenb's report, srsue's NAS context);
        commands: its stdin is a pipe for send_line (else /dev/null)."""
        self.argv = argv_in(netns, argv)
        self.log_path = log_path
        log_path.parent.mkdir(parents=True, exist_ok=True)
        self._log = open(log_path, "wb")
        # Own process group, so stop() also reaches what `ip netns exec` started.
        self.proc = subprocess.Popen(self.argv, stdout=self._log, stderr=subprocess.STDOUT,
                                     stdin=subprocess.PIPE if commands else subprocess.DEVNULL,
                                     start_new_session=True, cwd=cwd)

    def send_line(self, line: str) -> bool:
        """One command line to its stdin (commands=True); False when it is gone or takes no commands."""
        if self.proc.stdin is None or self.proc.poll() is not None:
            return False
        try:
            self.proc.stdin.write(line.encode() + b"\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):  # exited meanwhile, or stdin already closed
            return False
        return True

    def running(self) -> bool:
        return self.proc.poll() is None

    def wait(self, timeout_s: float) -> int:
        try:
            return self.proc.wait(timeout_s)
        finally:
            if self.proc.poll() is not None:
                self._log.close()

    def stop(self, grace_s: float = 3.0) -> int:
        if self.proc.poll() is None:
            self._signal(signal.SIGTERM)
            try:
                self.proc.wait(grace_s)
            except subprocess.TimeoutExpired:
                self._signal(signal.SIGKILL)
                self.proc.wait(5)
        if self.proc.stdin is not None:
            try:
                self.proc.stdin.close()
            except OSError:  # a write the program never read
                pass
        self._log.close()
        return self.proc.returncode

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:
            pass


class Stoppable(Protocol):
    def stop(self, grace_s: float = ...) -> object: ...


def stop_all(processes: Sequence[Stoppable], grace_s: float) -> None:
    """Stop every process at once, each with its own grace: shutdowns that each take seconds (srsue's
    detach, srsenb's exit) overlap instead of adding up."""
    if not processes:
        return
    with ThreadPoolExecutor(max_workers=len(processes)) as pool:
        list(pool.map(lambda p: p.stop(grace_s=grace_s), processes))
