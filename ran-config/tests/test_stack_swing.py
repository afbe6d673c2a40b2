"""The SR bench's swinging host: only srsenb under the given process is stopped, and it is continued at the end."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from cellab.errors import InputError
from cellab.ran.stack_swing import StackSwing, parse_swing


def test_parse_swing():
    assert parse_swing("5-35") == (5.0, 35.0)
    for bad in ("x", "35-5", "0-10", "5-500", "5"):
        with pytest.raises(InputError, match="CELLAB_SR_BENCH_SWING"):
            parse_swing(bad)


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_srsenb_under_the_root_is_stopped_and_continued_others_not(tmp_path: Path):
    fake = tmp_path / "srsenb"
    shutil.copy(shutil.which("sleep"), fake)
    root = subprocess.Popen(["sh", "-c", f"{fake} 30 & wait"])
    stranger = subprocess.Popen([str(fake), "30"])  # a srsenb that is not ours
    child = None
    try:
        time.sleep(0.3)
        child = int(subprocess.run(["pgrep", "-P", str(root.pid)], capture_output=True, text=True).stdout.split()[0])
        swing = StackSwing(root.pid, 30, 30).start()
        seen = set()
        for _ in range(200):
            seen.add(_state(child))
            assert _state(stranger.pid) != "T"
            time.sleep(0.002)
        swing.stop()
        assert "T" in seen and _state(child) != "T"
    finally:
        if child is not None:
            os.kill(child, signal.SIGKILL)
        for proc in (root, stranger):
            proc.kill()
            proc.wait()
