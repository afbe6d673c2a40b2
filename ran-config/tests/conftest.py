"""Fixtures of the RAN room's tests: the srsRAN bundle (skipped, saying so, when absent) and its machine lock."""

from __future__ import annotations

import os
import sqlite3
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from cellab.hostlock import SRSRAN_LOCK, host_lock
from cellab.testkit.helpers import skip_without_open5gs  # noqa: F401 (the room's tests import it from here)

BUNDLE = Path(__file__).resolve().parents[2].parent / "shared" / "tools" / "srsran"
LOCK_WAIT_S = 900.0  # another test's or session's srsRAN campaign may hold it for minutes


@pytest.fixture(scope="session")
def srsenb_bin() -> Path:
    binary = Path(os.environ.get("CELLAB_SRSRAN_BIN", BUNDLE / "bin")) / "srsenb"
    if not binary.is_file():
        pytest.skip(f"srsRAN bundle absent: no {binary} (../shared/tools/srsran, or set CELLAB_SRSRAN_BIN)")
    return binary


@pytest.fixture
def srsran_lock() -> Iterator[None]:
    """Holds the machine-wide srsRAN lock for one test (cellab.hostlock: every srsRAN user takes the same)."""
    with host_lock(SRSRAN_LOCK, LOCK_WAIT_S, "srsRAN test"):
        yield


@pytest.fixture
def bundle() -> Path:
    """The folder with srsenb, srsue and srsepc for the srsran-zmq lab (skipped, saying why, when absent or
    without root); waits for another stack on this host to finish (the lab takes the lock itself)."""
    folder = Path(os.environ.get("CELLAB_SRSRAN_BIN", BUNDLE / "bin"))
    if not all((folder / p).is_file() for p in ("srsenb", "srsue", "srsepc")):
        pytest.skip(f"srsRAN bundle absent: no srsenb/srsue/srsepc in {folder} (../shared/tools/srsran, "
                    "or set CELLAB_SRSRAN_BIN)")
    if os.geteuid() != 0:
        pytest.skip("the srsran-zmq lab needs root (network namespaces, TUN devices)")
    with host_lock(SRSRAN_LOCK, LOCK_WAIT_S, "srsran-zmq test"):
        pass
    return folder


def run_zmq_campaign(bundle: Path, tmp_path: Path, campaign_yaml: str, prefix: str,
                     lock_wait_s: float = 120.0) -> tuple[Path, list[tuple[str, str, str | None, str]], str]:
    """`cellab run` of a campaign on the srsran-zmq lab (no report): its result folder, its runs in plan order
    (run_id, status, error, factors JSON) and the tail of the command's output."""
    out, camp = tmp_path / "out", tmp_path / "camp.yaml"
    camp.write_text(campaign_yaml)
    env = os.environ | {"CELLAB_SRSRAN_BIN": str(bundle), "CELLAB_SRSRAN_LOCK_TIMEOUT_S": str(lock_wait_s)}
    proc = subprocess.run([sys.executable, "-m", "cellab", "run", str(camp), "--out", str(out), "--prefix", prefix,
                           "--no-report"], capture_output=True, text=True, timeout=lock_wait_s + 600, env=env)
    log = proc.stdout[-3000:] + proc.stderr[-3000:]
    folders = sorted(out.iterdir()) if out.is_dir() else []
    assert len(folders) == 1, (folders, log)
    with sqlite3.connect(folders[0] / "results.sqlite") as db:
        runs = list(db.execute("SELECT run_id, status, error, factors FROM runs ORDER BY idx"))
    return folders[0], runs, log


@pytest.fixture
def fake_srsenb(tmp_path: Path) -> Path:
    """The stand-in srsenb (fake_srsenb.py) as an executable in tmp_path/bin."""
    script = tmp_path / "bin" / "srsenb"
    script.parent.mkdir()
    script.write_text(f"#!{sys.executable}\n" + (Path(__file__).parent / "fake_srsenb.py").read_text())
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script
