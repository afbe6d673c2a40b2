"""The worker's side of a distributed campaign: lab slots on a Dask worker, and the task that runs one run.

A worker offers Dask resources: `vlab=K` (K embedded-lab instances on this host: wired, virtual, ...) or
`bench-NAME=1` for the inventory lab it drives (`cellab worker --lab bench.yaml`), plus `tag-T=1` for each of
that inventory's tags. Dask never starts more tasks asking for a resource than the worker offers, so each
task finds a free slot. A slot is a long-lived thread that owns one lab instance (a `LabSession`, kept from run
to run of the same campaign, so agents and namespaces come up once): it runs the run step there and returns the
record with the run folder's small files; the others wait in this worker's outbox until the controller has
pulled them in chunks (cellab.cluster.outbox). The controller writes them; the worker keeps nothing after.
Quarantine: a bench worker (never an embedded slot) leaves the pool after a failed health check or
RETIRE_AFTER failed runs in a row (invalid and aborted runs do not count).
"""

from __future__ import annotations

import hashlib
import os
import queue
import shutil
import tempfile
import threading
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import yaml

from cellab.cluster.outbox import FolderTooLarge, close_outbox, ship
from cellab.errors import CellabError
from cellab.records import write_atomic

#: the worker's inventory lab (`cellab worker --lab`), for tasks that ask for its bench
WORKER_LAB_ENV = "CELLAB_WORKER_LAB"
WORKER_SLOTS_ENV = "CELLAB_WORKER_SLOTS"
VLAB_RESOURCE = "vlab"
BENCH_RESOURCE = "bench"  # every bench worker offers it: `lab: bench` runs on any bench (with its `requires`)
RETIRE_AFTER = 2  # a bench whose runs fail this many times in a row leaves the pool (quarantine)


def bench_resource(inventory_name: str) -> str:
    return f"bench-{inventory_name}"


def tag_resource(tag: str) -> str:
    return f"tag-{tag}"


class Slot:
    """One lab instance and the thread that drives it (the agents it starts die with that thread's process)."""

    def __init__(self, index: int, worker: Any, scratch: Path):
        self.index, self.worker, self.scratch = index, worker, scratch
        self.worker_name = str(getattr(worker, "name", worker))
        self.session: Any = None
        self.session_key: tuple[Any, ...] | None = None
        self.failures_in_a_row = 0  # a bench that fails its health check or RETIRE_AFTER runs leaves the pool
        self.retired: dict[str, Any] | None = None  # why and when this bench left the pool
        self.running: tuple[str, dict[str, Any], Path, float] | None = None  # run id, factors, folder, since
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
        from cellab.campaign.load import load_campaign
        from cellab.campaign.model import LAB_FACTOR
        from cellab.records import PlannedRun
        from cellab.run.session import LabSession
        from cellab.run.step import RunRecord, check_module_params, execute_run

        key = hashlib.sha256(job["campaign_text"].encode()).hexdigest()[:16]
        campaign_dir = self.scratch / key
        campaign_dir.mkdir(parents=True, exist_ok=True)
        if self.retired is not None:
            from distributed import Reschedule

            raise Reschedule()  # this bench left the pool: the run goes to another worker that serves it
        lab = job["lab"]
        # only a bench (this worker's inventory) is ever quarantined: an embedded slot (`--slots`, a virtual or
        # wired lab) is this host's own, and retiring it would strand the campaign for nothing it did
        bench = lab.startswith("bench:")
        if bench:
            lab = os.environ.get(WORKER_LAB_ENV, "")
            if not lab:
                raise CellabError(f"worker {self.worker_name} drives no inventory lab, and {job['lab']} was asked")
        # the campaign as this lab sees it: its own lab (this worker's inventory, whose path is its own), no
        # `lab` factor (the other labs' files need not exist here)
        data = yaml.safe_load(job["campaign_text"])
        (data.get("factors") or {}).pop(LAB_FACTOR, None)
        data["lab"] = lab
        campaign_file = campaign_dir / "campaign.yaml"
        # atomic: this worker's other slots read the same file for runs of the same campaign
        write_atomic(campaign_file, yaml.safe_dump(data, sort_keys=False))
        campaign = load_campaign(campaign_file)
        run = PlannedRun(**job["run"])
        where = {"worker": self.worker_name, "slot": self.index}
        session_key = (lab, job["ue_count"], key)
        if self.session_key != session_key:
            self._close_session()
            session = LabSession(lab, ue_count=job["ue_count"],
                                 purpose=f"worker {self.worker_name} slot {self.index}")
            try:
                try:
                    session.open()  # an inventory lab's health check: every agent answers, the core starts
                except CellabError as exc:
                    if not bench:
                        raise
                    # the bench's own fault: its run fails naming why, and the bench leaves the pool
                    failed = RunRecord(run.run_id, "failed", 1, f"{exc}; {self.retire('its health check failed')}",
                                       placement={**where, "retired": self.retired})
                    return {"record": failed.as_dict(), "files": {}}
                check_module_params(session, [run], campaign_file)  # a campaign's mistake: no bench's fault
            except BaseException:
                session.close()
                raise
            self.session, self.session_key = session, session_key
        run_dir = campaign_dir / "runs" / run.run_id
        self.running = (run.run_id, run.factors, run_dir, time.time())  # what the controller's live view shows
        try:
            record: RunRecord = execute_run(self.session, campaign, run, run_dir, campaign_dir, where,
                                            log=lambda text: print(text, flush=True))
            # counted on the run's own status, before shipping: a folder over the per-run limit fails the run
            # in `shipped`, and that is the run's size, not the bench's fault (never counted toward quarantine)
            self.failures_in_a_row = failures_after(self.failures_in_a_row, record.status)
            if bench and self.failures_in_a_row >= RETIRE_AFTER:
                record.error = f"{record.error}; {self.retire(f'{RETIRE_AFTER} runs in a row failed')}"
                record.placement = {**record.placement, "retired": self.retired}
            return shipped(record, run_dir, str(getattr(self.worker, "address", self.worker_name)))
        finally:
            self.running = None
            shutil.rmtree(run_dir, ignore_errors=True)

    def retire(self, why: str) -> str:
        """Mark this bench retired and say so. The run's placement carries `self.retired`: the controller, once
        it has this result, records it for the report and retires the worker (closing it here would lose the
        result with it); runs that reach this slot meanwhile are handed back to Dask for another worker."""
        self.retired = {"worker": self.worker_name, "bench": os.environ.get(WORKER_LAB_ENV, ""), "reason": why,
                        "at": time.time(), "address": str(getattr(self.worker, "address", ""))}
        return f"worker {self.worker_name} left the pool: {why}"


def failures_after(in_a_row: int, status: str) -> int:
    """A bench's failed runs in a row after a run of `status`: an ok run clears them, a failed one adds one;
    an invalid run (the host lost real time: a validity matter, not the bench's) and an aborted one (the
    user, or a worker lost) leave the count as it was."""
    return 0 if status == "ok" else in_a_row + 1 if status == "failed" else in_a_row


def shipped(record: Any, run_dir: Path, worker_address: str) -> dict[str, Any]:
    """A finished run's task result: its record and small files inline, the others left in this worker's
    outbox for the controller to fetch in chunks (cellab.cluster.outbox); a folder above the per-run limit
    fails the run, naming its size and the limit."""
    try:
        files, outbox = ship(run_dir, worker_address)
    except FolderTooLarge as exc:
        record.status, record.error = "failed", f"{record.error + '; ' if record.error else ''}{exc}"
        files, outbox = {}, None
    return {"record": record.as_dict(), "files": files} | ({"outbox": outbox} if outbox else {})


class SlotPool:
    """The slots of this worker process: as many as the worker offers lab resources."""

    def __init__(self, count: int, worker: Any):
        self.scratch = Path(tempfile.mkdtemp(prefix=f"cellab-worker-{os.getpid()}-"))
        self.free: queue.Queue[Slot] = queue.Queue()
        self.slots = [Slot(i, worker, self.scratch) for i in range(count)]
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
            _pool = SlotPool(max(count, 1), worker)
        return _pool


def running_views() -> list[dict[str, Any]]:
    """This worker's running runs, each with its last seconds from the telemetry it is writing (cellab.run.view):
    what the controller's live view and `cellab status` show of runs on Dask (asked through client.run, out of the
    task slots). Plain values only: the answer crosses the wire."""
    from cellab.run.view import last_seconds

    out = []
    for slot in _pool.slots if _pool is not None else []:
        running = slot.running
        if running is None:
            continue
        run_id, factors, run_dir, since = running
        try:
            seen = last_seconds(run_dir)
        except OSError:  # the folder replaced under the reader (a retried attempt): the next look reads it
            seen = {}
        out.append({"worker": slot.worker_name, "slot": slot.index, "run_id": run_id, "factors": factors,
                    "running_s": time.time() - since, "seen": seen})
    return out


def close_pool() -> None:
    """Bring every lab instance of this worker down (the worker is closing)."""
    global _pool
    with _pool_lock:
        if _pool is not None:
            _pool.close()
            _pool = None
    close_outbox()  # run folders the controller did not fetch (it gave up, or refused the result) go too


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
        from cellab.run.step import RunRecord

        lost = RunRecord(job["run"]["run_id"], "aborted", 1, f"worker {earlier} was lost while it ran this run (not "
                         "retried: retry.after_worker_loss is off; --resume runs it again)",
                         placement={"worker": earlier})
        return {"record": lost.as_dict(), "files": {}}
    started_on.set(name)
    started.set()
    return _worker_pool(worker).run(job)
