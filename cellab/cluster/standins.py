"""Stand-in run tasks for the scale bench and the cluster's tests: they return what a real run's task returns
(a record and the run folder's files) without a lab. Module functions, so Dask worker processes import them by
name."""

from __future__ import annotations

import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

FLEET_SLEEP_S = 0.05


def sleeping_run(job: dict[str, Any], sleep_s: float = FLEET_SLEEP_S) -> dict[str, Any]:
    """A stand-in run task: sleeps, returns a record and one small file, as a real run's task would (importable
    by worker processes; the cluster's fault tests use it too)."""
    time.sleep(sleep_s)
    now = time.time()
    record = {"run_id": job["run"]["run_id"], "status": "ok", "attempts": 1, "error": None,
              "metrics": {"throughput_mbps": 1.0}, "ue_metrics": {"ue0": {"throughput_mbps": 1.0}},
              "placement": {"worker": "stand-in"}, "started_at": now - sleep_s, "finished_at": now}
    return {"record": record, "files": {"manifest.json": b"{}\n"}}


def folder_run(job: dict[str, Any], size_bytes: int) -> dict[str, Any]:
    """A stand-in run task whose run folder holds a capture of `size_bytes` (written in 1 MiB blocks of a
    pattern) beside its manifest: it returns it as a real run's task does (cellab.cluster.worker.shipped)."""
    from distributed import get_worker

    from cellab.cluster.worker import shipped
    from cellab.run.step import RunRecord

    folder = Path(tempfile.mkdtemp(prefix="cellab-folder-run-"))
    try:
        (folder / "manifest.json").write_text("{}\n")
        block = bytes(range(256)) * 4096
        with open(folder / "capture.pcap", "wb") as out:
            for start in range(0, size_bytes, len(block)):
                out.write(block[:size_bytes - start])
        now = time.time()
        record = RunRecord(job["run"]["run_id"], "ok", 1, placement={"worker": "stand-in"}, started_at=now,
                           finished_at=now)
        return shipped(record, folder, get_worker().address)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
