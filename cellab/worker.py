"""The worker's side of a distributed campaign: lab slots on a Dask worker, and the task that runs one run.

A worker offers Dask resources: `vlab=K` (K embedded-lab instances on this host: wired, virtual, ...) or
`bench-NAME=1` for the inventory lab it drives (`cellab worker --lab bench.yaml`), plus `tag-T=1` for each of
that inventory's tags. Dask never starts more tasks asking for a resource than the worker offers, so each
task finds a free slot. A slot is a long-lived thread that owns one lab instance (a `LabSession`, kept from run
to run of the same campaign, so agents and namespaces come up once): it runs the run step there, packs the run
folder, and returns the record and the files. The controller writes them; the worker keeps nothing.
"""

from __future__ import annotations

import hashlib
import os
import queue
import shutil
import tempfile
import threading
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from cellab.errors import CellabError

#: the worker's inventory lab (`cellab worker --lab`), for tasks that ask for its bench
WORKER_LAB_ENV = "CELLAB_WORKER_LAB"
WORKER_SLOTS_ENV = "CELLAB_WORKER_SLOTS"
VLAB_RESOURCE = "vlab"
MAX_RUN_FOLDER_BYTES = 2 << 30  # what one task may send back (a long capture is ~100 MB)


def bench_resource(inventory_name: str) -> str:
    return f"bench-{inventory_name}"


def tag_resource(tag: str) -> str:
    return f"tag-{tag}"


class Slot:
    """One lab instance and the thread that drives it (the agents it starts die with that thread's process)."""

    def __init__(self, index: int, worker_name: str, scratch: Path):
        self.index, self.worker_name, self.scratch = index, worker_name, scratch
        self.session: Any = None
        self.session_key: tuple[Any, ...] | None = None
        self.jobs: queue.Queue[tuple[dict[str, Any], Future] | None] = queue.Queue()
        self.thread = threading.Thread(target=self._serve, name=f"cellab-slot{index}", daemon=True)
        self.thread.start()

    def submit(self, job: dict[str, Any]) -> dict[str, Any]:
        done: Future = Future()
        self.jobs.put((job, done))
        return done.result()

    def close(self) -> None:
        self.jobs.put(None)
        self.thread.join(timeout=60)

    def _serve(self) -> None:
        while True:
            item = self.jobs.get()
            if item is None:
                self._close_session()
                return
            job, done = item
            try:
                done.set_result(self._run(job))
            except BaseException as exc:  # noqa: BLE001 - handed to the waiting task, which reports it
                done.set_exception(exc)

    def _close_session(self) -> None:
        if self.session is not None:
            try:
                self.session.close()
            finally:
                self.session, self.session_key = None, None

    def _run(self, job: dict[str, Any]) -> dict[str, Any]:
        from cellab.campaign import PlannedRun, load_campaign
        from cellab.runstep import RunRecord, check_module_params, execute_run
        from cellab.session import LabSession

        key = hashlib.sha256(job["campaign_text"].encode()).hexdigest()[:16]
        campaign_dir = self.scratch / key
        campaign_dir.mkdir(parents=True, exist_ok=True)
        campaign_file = campaign_dir / "campaign.yaml"
        campaign_file.write_text(job["campaign_text"])
        lab = job["lab"]
        if lab.startswith("bench:"):
            lab = os.environ.get(WORKER_LAB_ENV, "")
            if not lab:
                raise CellabError(f"worker {self.worker_name} drives no inventory lab, and {job['lab']} was asked")
        campaign = load_campaign(campaign_file, lab)
        run = PlannedRun(**job["run"])
        where = {"worker": self.worker_name, "slot": self.index}
        session_key = (lab, job["ue_count"], key)
        if self.session_key != session_key:
            self._close_session()
            session = LabSession(lab, ue_count=job["ue_count"],
                                 purpose=f"worker {self.worker_name} slot {self.index}")
            try:
                session.open()
                check_module_params(session, [run], campaign_file)
            except BaseException:
                session.close()
                raise
            self.session, self.session_key = session, session_key
        run_dir = campaign_dir / "runs" / run.run_id
        try:
            record: RunRecord = execute_run(self.session, campaign, run, run_dir, campaign_dir, where,
                                            log=lambda text: print(text, flush=True))
            return {"record": record.as_dict(), "files": pack_folder(run_dir)}
        finally:
            shutil.rmtree(run_dir, ignore_errors=True)


def pack_folder(folder: Path) -> dict[str, bytes]:
    """Every regular file below `folder` (path relative to it -> content); links are not followed."""
    files: dict[str, bytes] = {}
    total = 0
    for path in sorted(folder.rglob("*")):
        if path.is_symlink() or not path.is_file():
            continue
        data = path.read_bytes()
        total += len(data)
        if total > MAX_RUN_FOLDER_BYTES:
            raise CellabError(f"{folder}: the run folder is larger than {MAX_RUN_FOLDER_BYTES >> 20} MiB")
        files[str(path.relative_to(folder))] = data
    return files


class SlotPool:
    """The slots of this worker process: as many as the worker offers lab resources."""

    def __init__(self, count: int, worker_name: str):
        self.scratch = Path(tempfile.mkdtemp(prefix=f"cellab-worker-{os.getpid()}-"))
        self.free: queue.Queue[Slot] = queue.Queue()
        self.slots = [Slot(i, worker_name, self.scratch) for i in range(count)]
        for slot in self.slots:
            self.free.put(slot)

    def run(self, job: dict[str, Any]) -> dict[str, Any]:
        slot = self.free.get()
        try:
            return slot.submit(job)
        finally:
            self.free.put(slot)

    def close(self) -> None:
        for slot in self.slots:
            slot.close()
        shutil.rmtree(self.scratch, ignore_errors=True)


_pool: SlotPool | None = None
_pool_lock = threading.Lock()


def _worker_pool(worker: Any) -> SlotPool:
    global _pool
    with _pool_lock:
        if _pool is None:
            resources = dict(worker.state.total_resources)
            count = int(os.environ.get(WORKER_SLOTS_ENV) or 0) or int(
                max([resources.get(VLAB_RESOURCE, 0)] + [v for k, v in resources.items() if k.startswith("bench-")]))
            _pool = SlotPool(max(count, 1), str(worker.name))
        return _pool


def close_pool() -> None:
    """Bring every lab instance of this worker down (the worker is closing)."""
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.close()
            _pool = None


def run_task(job: dict[str, Any]) -> dict[str, Any]:
    """The Dask task of one run. A run whose task is started again (its first worker died mid-run: Dask
    reschedules such tasks) is not repeated behind the user's back, unless the campaign opted in
    (`retry.after_worker_loss`): it is stored `aborted`, naming the lost worker, and `--resume` runs it again."""
    from distributed import Event, Variable, get_worker

    worker = get_worker()
    started, started_on = Event(job["marker"]), Variable(job["marker"])
    earlier = started_on.get() if started.is_set() else None
    name = str(worker.name)
    if earlier and not job.get("retry_after_worker_loss"):
        return {"record": {"run_id": job["run"]["run_id"], "status": "aborted", "attempts": 1,
                           "error": f"worker {earlier} was lost while it ran this run (not retried: "
                                    "retry.after_worker_loss is off; --resume runs it again)", "metrics": None, "ue_metrics": None,
                           "placement": {"worker": earlier}, "started_at": 0.0, "finished_at": 0.0},
                "files": {}}
    started_on.set(name)
    started.set()
    return _worker_pool(worker).run(job)
