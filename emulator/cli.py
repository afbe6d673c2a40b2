"""`cellab vlab up|down|status`: the virtual lab from the command line (the lead mounts vlab_app)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from cellab.errors import CellabError

from .vlab import VirtualLab

vlab_app = typer.Typer(help="The virtual lab: namespaces joined by the emulated LTE cell.", no_args_is_help=True)


def _fail(exc: Exception) -> None:
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


@vlab_app.command()
def up(
    prefix: str = typer.Option("clv", help="namespace-name prefix (<prefix>-srv, <prefix>-ue0..)"),
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
) -> None:
    """Build the namespaces and start the cell."""
    try:
        lab = VirtualLab(prefix, {
            "n_prb": n_prb, "sr_period_ms": sr_period_ms, "ul_policy": ul_policy, "cqi_period_ms": cqi_period_ms,
            "n_ues": ues, "attenuation_db": attenuation_db,
            "rlc_queue": int(rlc_queue) if rlc_queue.isdigit() else rlc_queue,
            "core_delay_ms": core_delay_ms, "internet_delay_ms": internet_delay_ms, "trace": trace, "trace_up": trace_up, "seed": seed,
        })
        topo = lab.up()
    except CellabError as exc:
        _fail(exc)
        return
    typer.echo(f"server {topo.server.netns} {topo.server.address}")
    for ue in topo.ues:
        typer.echo(f"{ue.name} {ue.netns} {ue.address}")
    typer.echo(f"control {topo.extra['ctl']}  telemetry {topo.extra['pub']}")


@vlab_app.command()
def down(prefix: str = typer.Option("clv", help="namespace-name prefix")) -> None:
    """Stop the cell and remove every namespace with the prefix (safe to repeat)."""
    try:
        VirtualLab(prefix).down()
    except CellabError as exc:
        _fail(exc)


@vlab_app.command()
def status(prefix: str = typer.Option("clv", help="namespace-name prefix"),
           as_json: bool = typer.Option(False, "--json", help="print the full status as JSON")) -> None:
    """Namespaces present, the cell's pid and its counters."""
    try:
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
