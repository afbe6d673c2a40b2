"""A campaign's runs on Dask workers: `cellab run --slots N` (a local cluster) or `--cluster ADDRESS`.

Each run is one task (`cellab.cluster.worker.run_task`) that asks for the Dask resources of its lab: `vlab=1` for an
embedded lab kind, `bench-NAME=1` for an inventory lab, and `tag-T=1` for every tag the campaign requires.
Placement, exclusivity and the worker fleet are Dask's; cellab only checks before the first task that some
connected worker can serve each run, keeps runs that disagree on a host-scoped module parameter off one host at
once (cellab.cluster.hostscope), and stays the only writer of the result folder: every task returns its record
and its run folder's files (the large ones pulled in chunks: cellab.cluster.outbox), written here as they arrive.
"""

from __future__ import annotations

import functools
import json
import os
import sqlite3
import time
import uuid
from concurrent.futures import CancelledError
from pathlib import Path
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cellab.campaign.model import ANY_BENCH
from cellab.cluster.slots import check_slots
from cellab.cluster.worker import (
    BENCH_RESOURCE,
    VLAB_RESOURCE,
    WORKER_SLOTS_ENV,
    bench_resource,
    tag_resource,
)
from cellab.cluster.address import check_security, probe
from cellab.cluster.hostscope import HostGuard, modules_used, module_listing, place
from cellab.cluster.outbox import fetch, limit_bytes
from cellab.cluster.result import BadResult, check_outbox, check_result
from cellab.cluster.watch import SlotWatch
from cellab.envvars import env_seconds
from cellab.errors import CellabError, InputError
from cellab.records import PlannedRun, write_json
from cellab.results.cluster_events import add_event
from cellab.results.stopping import after_run
from cellab.run.step import RunRecord, ue_count

if TYPE_CHECKING:
    from cellab.run.runner import Runner

WORKER_WAIT_S = 30.0  # how long a campaign waits for the cluster's first workers
# then how long for more, while some run no connected worker can serve (workers started with it); both from the
# environment so that tests of the refusal and of an unreachable scheduler need not wait the default
WORKER_JOIN_ENV, WORKER_JOIN_S = "CELLAB_WORKER_JOIN_S", 10.0
CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT_S = "CELLAB_CONNECT_TIMEOUT_S", 10.0
POLL_S = 2.0  # how often the dispatcher looks at the cluster between finished runs
STRANDED_GRACE_S = 60.0  # how long runs may wait for a worker that can serve them to (re)join
SCHEDULER_GRACE_S = 20.0  # a scheduler silent this long stopped the campaign


def lab_resources(lab: str, tags: list[str]) -> dict[str, int]:
    """The Dask resources a run on `lab` needs (an embedded kind, or an inventory file)."""
    if lab == ANY_BENCH:
        wanted = {BENCH_RESOURCE: 1}
    elif lab.endswith((".yaml", ".yml")):
        from cellab.inventory.model import load_inventory

        wanted = {bench_resource(load_inventory(lab).name): 1}
    else:
        wanted = {VLAB_RESOURCE: 1}
    return wanted | {tag_resource(t): 1 for t in tags}


def job_lab(lab: str) -> str:
    """What a task names as its lab: an embedded kind, or `bench:NAME` (the worker uses its own inventory)."""
    if lab == ANY_BENCH:
        return "bench:*"
    if lab.endswith((".yaml", ".yml")):
        from cellab.inventory.model import load_inventory

        return f"bench:{load_inventory(lab).name}"
    return lab


def _security(tls_dir: Path | None) -> Any:
    if tls_dir is None:
        return None
    from cellab.cluster.tls import client_security

    return client_security(tls_dir)


def _served(wanted: dict[str, int], offers: Any) -> bool:
    """Some worker offers every resource a run asks for, in the amount it asks."""
    return any(all(offer.get(k, 0) >= v for k, v in wanted.items()) for offer in offers)


def _offers(workers: dict[str, Any]) -> dict[str, dict[str, int]]:
    return {w.get("name", addr): dict(w.get("resources") or {}) for addr, w in workers.items()}


def _unserved(runs: list[PlannedRun], needs: dict[str, dict[str, int]], workers: dict[str, Any]) -> list[tuple]:
    """(run id, its needs) of each run no connected worker can serve."""
    offers = _offers(workers).values()
    return [(run.run_id, needs[run.run_id]) for run in runs if not _served(needs[run.run_id], offers)]


def _check_servable(runs: list[PlannedRun], needs: dict[str, dict[str, int]], workers: dict[str, Any]) -> None:
    """Every run can go to some connected worker; else refuse before the first, naming the requirement."""
    offers = _offers(workers)
    missing = _unserved(runs, needs, workers)
    if missing:
        run_id, wanted = missing[0]
        shown = ", ".join(f"{name}: {sorted(offer) or 'nothing'}" for name, offer in sorted(offers.items()))
        raise CellabError(f"{len(missing)} run(s) no connected worker can serve: run {run_id} needs "
                          f"{', '.join(sorted(wanted))}; the workers offer {shown or 'nothing (none connected)'}")


def run_campaign(runner: Runner, slots: int | None = None, cluster: str | None = None,
                 tls_dir: Path | None = None, insecure: bool = False) -> dict[str, int]:
    """Every pending run of the runner's campaign: in process without `slots` and `cluster`, else on Dask workers
    (`slots`: a local cluster of that many lab instances; `cluster`: a running Dask scheduler's address)."""
    if slots is None and cluster is None:
        return runner.run()
    try:
        return run_distributed(runner, slots=slots, cluster=cluster, tls_dir=tls_dir, insecure=insecure)
    finally:
        runner.keep_comparisons()
        runner.store.settle()


def run_distributed(runner: Runner, slots: int | None = None, cluster: str | None = None,
                    tls_dir: Path | None = None, client: Any = None, task: Any = None,
                    insecure: bool = False) -> dict[str, int]:
    """`client`, `task`: an existing Dask client and a stand-in for the run task (the scale benchmark's
    fleet of sleeping workers). `insecure`: a tcp:// cluster accepted (`--insecure`); the campaign folder's
    cluster.json and every run's placement say so."""
    if client is not None:
        counts = {"ok": 0, "failed": 0, "aborted": 0, "invalid": 0}
        todo = list(runner.store.pending())
        return _dispatch(runner, client, todo, counts, wait_s=0, task=task) if todo else counts
    from distributed import Client, LocalCluster

    check_slots(slots)
    if (slots is None) == (cluster is None):
        raise InputError("cellab run", "--slots/--cluster", "give one of them", ["--slots N", "--cluster ADDRESS"])
    counts = {"ok": 0, "failed": 0, "aborted": 0, "invalid": 0}
    todo = list(runner.store.pending())
    if not todo:
        return counts
    local, transport = None, None
    if cluster is not None:
        check_security(cluster, tls_dir, insecure, "cellab run", "--cluster")
    try:
        if slots is not None:
            os.environ[WORKER_SLOTS_ENV] = str(slots)  # the local worker's slot count (inherited)
            local = LocalCluster(n_workers=1, threads_per_worker=slots, processes=True, dashboard_address=None,
                                 resources={VLAB_RESOURCE: slots}, silence_logs=40)
            client = Client(local)
        else:
            client = _connect(cluster, tls_dir, insecure)
            transport = "tls" if cluster.startswith("tls://") else "tcp without TLS (--insecure)"
            write_json(runner.store.root / "cluster.json", {"address": cluster, "transport": transport,
                                                              "insecure": transport != "tls"})
    except (OSError, TimeoutError) as exc:
        raise CellabError(f"Dask scheduler {cluster or 'local'}: {type(exc).__name__}: {exc}") from None
    try:
        with client:
            return _dispatch(runner, client, todo, counts, wait_s=0 if local else WORKER_WAIT_S,
                             transport=transport)
    finally:
        if local is not None:
            local.close()
        os.environ.pop(WORKER_SLOTS_ENV, None)


def _connect(address: str, tls_dir: Path | None, insecure: bool = False) -> Any:
    """A client of the scheduler at `address`, its security options checked first (cellab.cluster.address) and the
    scheduler probed within the connect timeout: one that accepts and never answers is an error, not a hang."""
    from distributed import Client

    check_security(address, tls_dir, insecure, "cellab run", "--cluster")
    timeout_s = env_seconds(CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT_S, 0.1)
    probe(address, tls_dir, timeout_s)
    return Client(address, security=_security(tls_dir), timeout=timeout_s)


def _wait_for_workers(client: Any, wait_s: float, servable: Any) -> dict[str, Any]:
    """The connected workers, once servable(workers) or the wait is over: up to wait_s for the first worker,
    then WORKER_JOIN_S more for the others a run needs (workers and campaign are often started together)."""
    deadline = time.monotonic() + wait_s
    joined_by = None
    while True:
        workers = client.scheduler_info(n_workers=-1)["workers"]
        if workers and joined_by is None:
            joined_by = time.monotonic() + (env_seconds(WORKER_JOIN_ENV, WORKER_JOIN_S) if wait_s else 0.0)
        if servable(workers) or time.monotonic() >= (joined_by or deadline):
            return workers
        time.sleep(0.5)


def _dispatch(runner: Runner, client: Any, todo: list[PlannedRun], counts: dict[str, int], wait_s: float,
              task: Any = None, transport: str | None = None) -> dict[str, int]:
    from distributed import wait

    from cellab.cluster.worker import close_pool, run_task

    task = task or run_task
    campaign, store = runner.campaign, runner.store
    text = store.campaign_path().read_text()
    token = uuid.uuid4().hex[:12]
    needs = {run.run_id: lab_resources(run.params.get("lab", campaign.lab), campaign.requires) for run in todo}
    _check_servable(todo, needs, _wait_for_workers(client, wait_s, lambda workers: not _unserved(todo, needs, workers)))
    by_key: dict[str, PlannedRun] = {}
    futures = []
    guard, held, noted = _host_guard(todo), [], set()

    def submit(run: PlannedRun) -> Any:
        """The run's future, or None when it is held back (a host-scoped parameter: cellab.cluster.hostscope)."""
        lab = run.params.get("lab", campaign.lab)
        needs.setdefault(run.run_id, lab_resources(lab, campaign.requires))
        where = place(guard, run, lambda: client.scheduler_info(n_workers=-1)["workers"], needs[run.run_id],
                      lambda held_run, host, why: _note_serialized(runner, held_run, host, why, noted))
        if where is None:
            held.append(run)
            return None
        job = {"campaign_text": text, "run": run.model_dump(), "lab": job_lab(lab),
               "ue_count": ue_count(run.params.get("ues")), "marker": f"cellab-{token}-{run.run_id}",
               "retry_after_worker_loss": campaign.retry.after_worker_loss}
        future = client.submit(task, job, key=f"cellab-run-{run.run_id}-{token}", pure=False,
                               resources=needs[run.run_id], **where)
        by_key[future.key] = run
        futures.append(future)
        return future

    def submit_held() -> set[Any]:
        again = held[:]
        held.clear()
        return {f for f in map(submit, again) if f is not None}

    for run in todo:
        submit(run)
    total = len(store.planned())
    with runner._progress() as progress:
        bar = progress.add_task(f"{campaign.name} on Dask", total=total, completed=total - len(todo))
        watch = SlotWatch(client, runner.view.say, store.root)  # the running slots' last seconds, said
        try:
            pending, stranded_since, lost_since, looked_at = set(futures), None, None, 0.0
            while pending or held:
                try:
                    done, pending = wait(pending, timeout=POLL_S, return_when="FIRST_COMPLETED") if pending \
                        else (set(), set())
                except TimeoutError:  # nothing finished within POLL_S: look at the cluster
                    done = set()
                watch.tick()
                for future in done:
                    run = by_key[future.key]
                    guard.release(run)
                    record, files, outbox = _outcome(future, run)
                    if transport:  # where it ran includes how its result travelled, in the store and the manifest
                        record.placement = {**record.placement, "transport": transport}
                        files = _manifest_placement(files, record.placement)
                    _store(runner, run, record, files, counts,
                           functools.partial(fetch, client, outbox) if outbox else None)
                    _note_retired(runner, run, record, client)
                    future.release()  # stored: the worker need not keep the result (a retiring one cannot)
                    progress.advance(bar)
                    more = after_run(campaign, store, run, runner.console.print)  # a stopping rule may want more
                    pending |= {f for f in map(submit, more) if f is not None}
                    if more:
                        progress.update(bar, total=len(store.planned()))
                if done and held:  # runs in flight ended: a held-back run may agree with a host now
                    pending |= submit_held()
                lost_since = None if client.status == "running" else (lost_since or time.monotonic())
                if lost_since is not None:
                    if time.monotonic() - lost_since > SCHEDULER_GRACE_S:
                        raise OSError(f"no answer from it for {SCHEDULER_GRACE_S:g} s (client {client.status})")
                    continue  # it may come back: Dask reconnects by itself
                if time.monotonic() - looked_at < POLL_S:  # the cluster is asked once per POLL_S, not per run
                    continue
                looked_at = time.monotonic()
                stranded = _unservable(client, pending, by_key, needs, guard.pinned)
                stranded_since = (stranded_since or time.monotonic()) if stranded else None
                if stranded and time.monotonic() - stranded_since > STRANDED_GRACE_S:
                    # the benches that could serve these left the pool (health check, failures) and none came
                    # back: they end aborted (`--resume` runs them) instead of waiting for ever
                    client.cancel(list(stranded))
                    pending -= set(stranded)
                    for future, why in stranded.items():
                        run = by_key[future.key]
                        guard.release(run)
                        _store(runner, run, RunRecord(run.run_id, "aborted", 1, why), {}, counts)
                        progress.advance(bar)
        except CancelledError as exc:  # one future's or, from wait(), many futures' (FuturesCancelledError)
            raise CellabError(f"the Dask scheduler stopped the campaign ({_cancelled_why(exc)}); everything finished "
                              f"is stored; `cellab run --resume {store.root}` continues it") from None
        except OSError as exc:
            raise CellabError(f"lost the Dask scheduler ({type(exc).__name__}: {exc}); everything finished is "
                              f"stored; `cellab run --resume {store.root}` continues it") from None
        except KeyboardInterrupt:
            client.cancel(futures)
            raise
        finally:
            watch.close()
            if client.status == "running":  # a scheduler that is gone has nothing left to release
                try:
                    client.run(close_pool)  # every worker's lab instances down: nothing held between campaigns
                except Exception:  # noqa: BLE001 - a worker that left meanwhile has nothing to release either
                    pass
    return counts


def _store(runner: Runner, run: PlannedRun, record: RunRecord, files: dict[str, bytes], counts: dict[str, int],
           fetch: Callable[[Path], Any] | None = None) -> None:
    """One run's checked record and files into the store (`fetch`: the files left on the worker, streamed into
    the run's folder). A store that cannot take them (a disk full, a file that is a folder's name too, a worker
    gone before its files came) fails that run, naming why; the campaign goes on. Only when even the failed
    record cannot be written does the campaign stop, saying so (not as a lost scheduler: storing is not Dask's)."""
    try:
        folder = runner.store.import_files(run, files)
        if fetch is not None:
            fetch(folder)
        runner.store.save_record(run, record, started=False)
    except (CellabError, OSError, sqlite3.Error, ValueError, TypeError, OverflowError) as exc:
        why = f"the controller could not store its result ({type(exc).__name__}: {exc})"
        record = RunRecord(run.run_id, "failed", max(record.attempts, 1), why, placement=record.placement)
        try:
            runner.store.import_files(run, {})
            runner.store.save_record(run, record, started=False)
        except (CellabError, OSError, sqlite3.Error, ValueError) as again:
            raise CellabError(f"run {run.run_id}: {why}; storing it as failed did not work either "
                              f"({type(again).__name__}: {again}); the runs stored before it are kept; "
                              f"`cellab run --resume {runner.store.root}` continues the campaign") from None
    runner.stored(run, record, counts)
    if record.status != "ok":
        runner.console.print(f"[yellow]run {run.run_id} {record.status}:[/] {_plain(record.error)}")


def _host_guard(todo: list[PlannedRun]) -> HostGuard:
    """The guard of host-scoped parameters, with the catalog asked only when some run uses a server module."""
    return HostGuard(module_listing() if any(modules_used(run.params) for run in todo) else None)


def _note_serialized(runner: Runner, run: PlannedRun, host: str, why: tuple[str, str, str], noted: set[str]) -> None:
    """A run held back from `host` (once per run: `noted`): recorded for the report's cluster section."""
    if run.run_id in noted:
        return
    noted.add(run.run_id)
    param, value, other = why
    add_event(runner.store.root, "serialized", run_id=run.run_id, host=host, param=param, value=value, other=other)


def _note_retired(runner: Runner, run: PlannedRun, record: RunRecord, client: Any = None) -> None:
    """A bench that left the pool with this run (its health check, or failed runs in a row): its worker retired
    (once its result is here), recorded in the campaign folder for the report's own section, said on the console."""
    retired = record.placement.get("retired")
    if not isinstance(retired, dict):
        return
    address = retired.get("address")
    if client is not None and isinstance(address, str) and address:
        try:
            client.retire_workers(workers=[address], close_workers=True)
        except Exception:  # noqa: BLE001 - a worker already gone is retired all the same
            pass
    add_event(runner.store.root, "retired", worker=retired.get("worker"), bench=retired.get("bench"),
              reason=retired.get("reason"), run_id=run.run_id)
    runner.console.print(f"[yellow]bench worker {_plain(retired.get('worker'))} retired:[/] "
                         f"{_plain(retired.get('reason'))}")


def _manifest_placement(files: dict[str, bytes], placement: dict[str, Any]) -> dict[str, bytes]:
    """The run folder's manifest with the placement the controller stores (a manifest that is not a JSON object is
    left as it is: the store's checks refuse it on their own)."""
    try:
        manifest = json.loads(files["manifest.json"])
    except (KeyError, ValueError, UnicodeDecodeError):
        return files
    if not isinstance(manifest, dict):
        return files
    manifest["placement"] = placement
    return {**files, "manifest.json": (json.dumps(manifest, indent=2, sort_keys=True, default=str) + "\n").encode()}


def _cancelled_why(exc: BaseException) -> str:
    """Dask's reason for cancelled runs in a line (its message lists every cancelled future)."""
    text = str(exc)
    if "connection-lost" in text or "lost the connection" in text:
        return "it was lost: the runs in flight were cancelled"
    return (text.splitlines() or [type(exc).__name__])[0][:200]


def _plain(text: str | None) -> str:
    """A worker's text shown on the console without rich markup in it being taken as markup."""
    from rich.markup import escape

    return escape(str(text))


def _unservable(client: Any, pending: set[Any], by_key: dict[str, PlannedRun], needs: dict[str, dict[str, int]],
                pinned: dict[str, list[str]]) -> dict[Any, str]:
    """Pending runs that no connected worker offers the resources for any more (or, for a run placed on one
    host for a host-scoped parameter, none of that host's workers), with the reason."""
    if not pending:
        return {}
    workers = client.scheduler_info(n_workers=-1)["workers"]
    offers = [dict(w.get("resources") or {}) for w in workers.values()]
    out = {}
    for future in pending:
        run_id = by_key[future.key].run_id
        wanted = needs[run_id]
        if not _served(wanted, offers):
            out[future] = (f"no connected worker can serve it any more (it needs {', '.join(sorted(wanted))}); "
                           "`--resume` runs it once such a worker is back")
        elif run_id in pinned and not set(pinned[run_id]) & set(workers):
            out[future] = ("the workers of the host it was placed on (for a host-scoped module parameter) left; "
                           "`--resume` runs it again")
    return out


def _outcome(future: Any, run: PlannedRun) -> tuple[RunRecord, dict[str, bytes], dict[str, Any] | None]:
    """A finished task's record, inline files and outbox (the files left on the worker, or None); a task that
    raised is a failed run, one whose worker died an aborted run naming the worker (unfinished: `--resume`
    runs it again)."""
    from distributed import KilledWorker

    try:
        result = future.result()
    except KilledWorker as exc:
        worker = getattr(exc.last_worker, "name", None) or getattr(exc.last_worker, "address", "?")
        return RunRecord(run.run_id, "aborted", 1, f"worker {worker} was lost while it ran this run (--resume "
                         "runs it again)", placement={"worker": worker}), {}, None
    except (CellabError, OSError) as exc:
        return RunRecord(run.run_id, "failed", 1, f"{type(exc).__name__}: {exc}"), {}, None
    except Exception as exc:  # noqa: BLE001 - a worker-side failure of any kind fails this run only
        if type(exc).__name__ in ("CommClosedError", "CancelledError", "FutureCancelledError"):
            raise
        return RunRecord(run.run_id, "failed", 1, f"{type(exc).__name__} on the worker: {exc}"), {}, None
    try:
        record, files = check_result(result, run)
        outbox = check_outbox(result, files, limit_bytes())
    except BadResult as exc:
        return RunRecord(run.run_id, "failed", 1, f"the worker's result was refused: {exc}"), {}, None
    return record, {"/".join(parts): data for parts, data in files.items()}, outbox
