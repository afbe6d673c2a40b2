"""`cellab modules ...`: the server modules and the sender from the command line (the lead mounts modules_app)."""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from typing import Annotated

import typer

from cellab.errors import CellabError

from . import modules
from .sender import Sender, SenderConfig

modules_app = typer.Typer(help="BPF congestion controls (c2tcp, scubic, exll, cubic_qarr, cubic_barr) and helpers.",
                          no_args_is_help=True)


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


@modules_app.command("list")
def list_() -> None:
    """Every module, whether it is loaded, and its parameters."""
    try:
        described = modules.describe()
    except CellabError as exc:
        _fail(exc)
    for info in described.values():
        state = "loaded" if info.loaded else "-"
        params = ", ".join(f"{k}={v:g}" for k, v in info.params.items())
        typer.echo(f"{info.name:<11} {info.kind:<18} {state:<7} {params}")


@modules_app.command()
def load(
    names: Annotated[list[str], typer.Argument(help="modules to load")],
    netns: Annotated[str | None, typer.Option(help="tc modules: namespace of the interface")] = None,
    dev: Annotated[str | None, typer.Option(help="tc modules: interface")] = None,
) -> None:
    """Register congestion controls / attach tc programs (links pinned under /sys/fs/bpf/cellab). A congestion
    control stays until `unload` (held by the host; a lab instance's holds are its own)."""
    try:
        modules.load(names, netns=netns, dev=dev, source="command line", persistent=True)
    except CellabError as exc:
        _fail(exc)
    typer.echo("loaded: " + " ".join(names))


@modules_app.command()
def unload(names: Annotated[list[str] | None, typer.Argument(help="modules (default: all)")] = None,
           force: Annotated[bool, typer.Option(help="also what a lab instance still holds")] = False) -> None:
    """Unregister / detach what no lab instance holds; established connections keep their congestion control."""
    try:
        modules.unload(names or None, source="command line", persistent=True, force=force)
    except CellabError as exc:
        _fail(exc)


@modules_app.command("set")
def set_(
    name: str,
    param: str,
    value: float,
    dst: Annotated[str | None, typer.Option(help="c2tcp target_ms for one destination prefix (CIDR)")] = None,
    netns: Annotated[str | None, typer.Option(help="for the flows of this network namespace only")] = None,
) -> None:
    """Set one parameter of a loaded module (host-wide, or for one namespace's flows)."""
    try:
        modules.set_param(name, param, value, dst=dst, netns=netns, source="command line")
    except CellabError as exc:
        _fail(exc)


@modules_app.command()
def clear(
    netns: Annotated[str, typer.Option(help="the namespace whose parameters go")],
    names: Annotated[list[str] | None, typer.Argument(help="modules (default: all)")] = None,
) -> None:
    """Drop the parameters set for one namespace (its flows see the host-wide values again)."""
    try:
        modules.clear_params(netns, names or None, source="command line")
    except CellabError as exc:
        _fail(exc)


@modules_app.command()
def stats(
    name: str,
    flows: Annotated[bool, typer.Option(help="c2tcp: one record per flow (namespace, Target, ...)")] = False,
    netns: Annotated[str | None, typer.Option(help="with --flows: this namespace's flows only")] = None,
) -> None:
    """A loaded module's counters (JSON), or its per-flow records."""
    try:
        typer.echo(json.dumps(modules.flow_stats(name, netns) if flows else modules.stats(name)))
    except CellabError as exc:
        _fail(exc)


@modules_app.command()
def send(
    log_dir: Annotated[Path | None, typer.Option(help="where flows.jsonl and flow-<id>.jsonl go "
                                                 "(default: a new folder under $TMPDIR)")] = None,
    port: int = 5301,
    bind: str | None = None,
    cc: Annotated[str | None, typer.Option(help="default congestion control")] = None,
    sample_ms: int = 10,
    netns: Annotated[str | None, typer.Option(help="run inside this namespace")] = None,
) -> None:
    """Run cellab-send until Ctrl-C."""
    try:
        sender = Sender(SenderConfig(port=port, bind=bind, cc=cc, sample_ms=sample_ms, netns=netns), log_dir)
        bound = sender.start()
    except (CellabError, ValueError) as exc:
        _fail(exc)
    typer.echo(f"cellab-send listening on port {bound}, logs in {sender.log_dir} (Ctrl-C stops)")
    stop = {"now": False}
    signal.signal(signal.SIGINT, lambda *_: stop.update(now=True))
    signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    while not stop["now"] and sender.proc is not None and sender.proc.poll() is None:
        time.sleep(0.2)
    info = sender.stop()
    typer.echo(f"stopped: {info}")
