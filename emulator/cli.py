"""`cellab vlab up|down|status`: the virtual lab from the command line (the lead mounts vlab_app)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated

import typer

from cellab.errors import CellabError
from cellab.labs import instances


vlab_app = typer.Typer(help="The virtual lab: namespaces joined by the emulated LTE cell.", no_args_is_help=True)


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


@vlab_app.command()
def up(
    prefix: str | None = typer.Option(None, help="namespace-name prefix (<prefix>-srv, <prefix>-ue0..); default: "
                                      "the first free of clv, clv2, ..."),
    n_prb: int = typer.Option(25, help="cell bandwidth in PRBs: 6, 15, 25, 50, 75, 100"),
    sr_period_ms: int = typer.Option(20, help="SR period: 5, 10, 20, 40, 80"),
    ul_policy: str = typer.Option("srsenb", help="uplink scheduling: srsenb or sr-strict"),
    cqi_period_ms: int = typer.Option(40, help="CQI report period"),
    ues: int = typer.Option(1, help="number of UEs"),
    attenuation_db: float = typer.Option(0.0, help="initial attenuation for every UE"),
    rlc_queue: str = typer.Option("srsenb", help='per-UE downlink queue: "srsenb" (256 packets, 150 ms discard) '
                                  "or a byte limit such as 4194304"),
    core_delay_ms: float = typer.Option(0.0, help="one-way core delay"),
    internet_delay_ms: float = typer.Option(0.0, help="one-way Internet delay"),
    trace: Annotated[Path | None, typer.Option(help="Mahimahi downlink trace instead of the radio model")] = None,
    trace_up: Annotated[Path | None, typer.Option(help="Mahimahi uplink trace instead of SR and grants")] = None,
    seed: int = typer.Option(1, help="random seed"),
    log_max_mb: float | None = typer.Option(None, min=0.0625, max=1 << 30, help="bound of the cell's TTI log, "
                                            "own clock and cell.log in /run, each with its older segment "
                                            "(default 256, or $CELLAB_LAB_LOG_MAX_BYTES; docs/log-bounds.md)"),
) -> None:
    """Build the namespaces and start the cell."""
    try:
        lease = instances.claim(prefix, "virtual", "cellab vlab up") if prefix else \
            instances.allocate("virtual", "cellab vlab up")
        from .vlab import VirtualLab  # pyroute2, zmq: only when an instance is touched

        lab = VirtualLab(lease.prefix, {
            "n_prb": n_prb, "sr_period_ms": sr_period_ms, "ul_policy": ul_policy, "cqi_period_ms": cqi_period_ms,
            "n_ues": ues, "attenuation_db": attenuation_db,
            "rlc_queue": int(rlc_queue) if rlc_queue.isdigit() else rlc_queue,
            "core_delay_ms": core_delay_ms, "internet_delay_ms": internet_delay_ms, "trace": trace, "trace_up": trace_up, "seed": seed,
        })
        lab.lease = lease
        lab.cell_keeps_lease = True
        if log_max_mb is not None:
            lab.log_max_bytes = int(log_max_mb * (1 << 20))
        topo = lab.up()
    except CellabError as exc:
        _fail(exc)
        return
    typer.echo(f"prefix {lab.prefix}")
    typer.echo(f"server {topo.server.netns} {topo.server.address}")
    for ue in topo.ues:
        typer.echo(f"{ue.name} {ue.netns} {ue.address}")
    typer.echo(f"control {topo.extra['ctl']}  telemetry {topo.extra['pub']}")


@vlab_app.command()
def down(prefix: str | None = typer.Option(None, help="the instance to stop (default: remove crashed instances' "
                                           "leftovers and list the live ones)")) -> None:
    """Stop a `cellab vlab up` instance and remove its namespaces; without --prefix, clean every crashed
    instance's leftovers and name the live instances (a campaign's lab is never torn down from here)."""
    try:
        if prefix is None:
            _down_leftovers()
            return
        instances.check_prefix(prefix, "cellab vlab down")
        who = instances.holder(prefix)
        if instances.is_live(prefix) and who is not None and who.pid != os.getpid() and instances.alive(who.pid):
            raise instances.InstanceBusy(f"lab prefix {prefix!r} belongs to a running {who.describe()}; stop that "
                                         "instead")
        if instances.is_live(prefix) or (who and who.kind == "virtual") or not instances.namespaces_of(prefix):
            from .vlab import VirtualLab  # pyroute2, zmq: only when an instance is touched

            VirtualLab(prefix).down()  # the cell holds a `vlab up` instance's lease: stopping it frees it
        else:
            instances.clean(prefix)
    except CellabError as exc:
        _fail(exc)


def _down_leftovers() -> None:
    live = []
    for info in instances.list_instances():
        if info.live:
            live.append(info)
            continue
        kind = instances.clean(info.prefix)
        typer.echo(f"removed the leftovers of crashed {kind} instance {info.prefix} "
                   f"({' '.join(info.namespaces) or 'no namespaces'})")
    for info in live:
        typer.echo(f"live: {info.prefix} ({info.holder.describe() if info.holder else 'holder unknown'}); "
                   f"`cellab vlab down --prefix {info.prefix}` stops it")
    if not live:
        typer.echo("no live lab instances")


@vlab_app.command()
def status(prefix: str | None = typer.Option(None, help="one instance (default: every instance on this host)"),
           as_json: bool = typer.Option(False, "--json", help="print the full status as JSON")) -> None:
    """Namespaces present, the cell's pid and its counters; without --prefix, every lab instance on this host
    (live, or a crashed one's leftovers that `cellab vlab down` removes)."""
    try:
        if prefix is None:
            found = [i.as_dict() for i in instances.list_instances()]
            if as_json:
                typer.echo(json.dumps(found, indent=2))
                return
            for item in found:
                holder = item["holder"] or {}
                state = "live" if item["live"] else "leftovers (crashed; `cellab vlab down` removes them)"
                typer.echo(f"{item['prefix']}: {holder.get('kind', '?')} {state}; namespaces: "
                           f"{' '.join(item['namespaces']) or '-'}")
            if not found:
                typer.echo("no lab instances on this host")
            return
        from .vlab import VirtualLab  # pyroute2, zmq: only when an instance is touched

        info = VirtualLab(prefix).status()
    except CellabError as exc:
        _fail(exc)
        return
    if as_json:
        typer.echo(json.dumps(info, indent=2))
        return
    typer.echo(f"namespaces: {' '.join(info['namespaces']) or '-'}")
    typer.echo(f"cell: {'pid ' + str(info['cell_pid']) if info['cell_pid'] else 'not running'}")
    for ue in (info.get("cell") or {}).get("ues", []):
        typer.echo(f"  ue{ue['ue']}: atten {ue['attenuation_db']:.1f} dB rsrp {ue['rsrp_dbm']:.1f} dBm "
                   f"cqi {ue['cqi']} queue {ue['queue_bytes']} B delivered {ue['delivered_bytes']} B")
