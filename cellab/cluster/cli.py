"""`cellab worker` (a Dask worker offering this host's lab slots or one bench) and `cellab tls` (certificates for
the cluster's traffic)."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
from pathlib import Path

import typer

from cellab.envvars import env_seconds
from cellab.errors import CellabError, InputError

CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT_S = "CELLAB_CONNECT_TIMEOUT_S", 15.0  # env: tests need not wait 15 s


def _check_scheduler(address: str, tls: Path | None = None, insecure: bool = False) -> str:
    from cellab.cluster.address import check_security

    check_security(address, tls, insecure, "cellab worker", "--scheduler")
    return address


def worker_resources(lab: Path | None, slots: int | None) -> tuple[dict[str, float], int, str | None]:
    """(the Dask resources this worker offers, its slot count, its inventory lab's absolute path)."""
    from cellab.cluster.slots import check_slots

    if (lab is None) == (slots is None):
        raise InputError("cellab worker", "--lab/--slots", "give one: a bench's inventory, or a count of lab "
                         "instances for this host", ["--lab LAB.yaml", "--slots N"])
    check_slots(slots, "cellab worker")
    from cellab.cluster.worker import BENCH_RESOURCE, VLAB_RESOURCE, bench_resource, tag_resource

    if slots is not None:
        return {VLAB_RESOURCE: float(slots)}, slots, None
    from cellab.inventory.model import load_inventory

    inventory = load_inventory(lab)
    offered = {BENCH_RESOURCE: 1.0, bench_resource(inventory.name): 1.0} | {tag_resource(t): 1.0 for t in inventory.tags}
    return offered, 1, str(Path(lab).resolve())


def worker_cmd(
    scheduler: str = typer.Option(..., help="the Dask scheduler, e.g. tls://10.0.0.1:8786"),
    lab: Path | None = typer.Option(None, help="offer this bench (its inventory) to the cluster"),
    slots: int | None = typer.Option(None, help="offer N embedded-lab instances of this host (virtual, wired, ...)"),
    name: str | None = typer.Option(None, help="the worker's name in the store's placement (default: host name)"),
    tls: Path | None = typer.Option(None, help="the folder `cellab tls` made (required for tls:// schedulers)"),
    insecure: bool = typer.Option(False, help="accept a tcp:// scheduler (no encryption, no authentication)"),
) -> None:
    """Serve a campaign's runs from a Dask scheduler: a bench (--lab) or this host's lab slots (--slots)."""
    _check_scheduler(scheduler, tls, insecure)
    resources, count, lab_path = worker_resources(lab, slots)
    from distributed import Worker  # after the checks: a refused command does not wait for Dask to load

    from cellab.cluster.worker import WORKER_LAB_ENV, WORKER_SLOTS_ENV, close_pool

    security = None
    if tls is not None:
        from cellab.cluster.tls import worker_security

        security = worker_security(tls)
    os.environ[WORKER_SLOTS_ENV] = str(count)
    if lab_path:
        os.environ[WORKER_LAB_ENV] = lab_path
    worker_name = name or f"{socket.gethostname()}-{os.getpid()}"
    connect_timeout_s = env_seconds(CONNECT_TIMEOUT_ENV, CONNECT_TIMEOUT_S, 0.1)

    async def serve() -> None:
        worker = Worker(scheduler, nthreads=count, resources=resources, name=worker_name, security=security,
                        death_timeout=connect_timeout_s, dashboard=False)
        loop = asyncio.get_running_loop()

        def stop(signum: int, _frame: object) -> None:  # not loop.add_signal_handler: its wakeup fd is inherited
            print(f"worker {worker_name}: {signal.Signals(signum).name}, closing", flush=True)
            loop.call_soon_threadsafe(lambda: asyncio.ensure_future(worker.close(reason=f"signal {signum}")))

        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, stop)
        try:
            await asyncio.wait_for(worker.start(), connect_timeout_s + 5)
        except (TimeoutError, OSError) as exc:
            raise CellabError(f"worker {worker_name}: the scheduler {scheduler} did not answer within "
                              f"{connect_timeout_s:g} s ({type(exc).__name__}: {exc})") from None
        print(f"worker {worker_name} at {worker.address}: offers {resources}", flush=True)
        await worker.finished()

    try:
        asyncio.run(serve())
    finally:
        close_pool()  # every lab instance this worker brought up goes down with it


def tls_cmd(folder: str = typer.Argument(..., help="a new folder for ca.pem, ca.key, node.pem, node.key"),
            host: list[str] | None = typer.Option(None, help="a name or address the cluster's hosts use (repeat)")
            ) -> None:
    """Make the cluster's certificates: a CA and one node certificate for the scheduler, workers and controller."""
    from cellab.cluster.tls import make_certs
    from cellab.cluster.tls_names import check_cert_host
    from cellab.outdir import check_out_dir

    where = check_out_dir(folder, "cellab tls", "FOLDER")  # "" is not the current folder: a CA key lands there
    hosts = [check_cert_host(h) for h in host or []]
    for name, path in make_certs(where, hosts).items():
        typer.echo(f"{name}: {path}")


def mount(app: typer.Typer) -> None:
    app.command("worker")(worker_cmd)
    app.command("tls")(tls_cmd)
