"""`cellab probe …`: run the receiver probe by hand (the lead mounts `probe_app` on the main CLI).

    cellab probe fetch 10.200.0.1 --seconds 5 --control exll --sr-probes 30 --netns clv-ue0 --out runs/out/p1
    cellab probe analyze capture.pcap --out /tmp/a
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from cellab.errors import CellabError, InputError, InputErrors

from .probe_runner import AnalyzeRequest, ProbeResult, run_analyze, run_fetch, validate_fetch

probe_app = typer.Typer(help="The receiver probe: timed downloads with ExLL/DFCSD control, SR-period estimates.",
                        no_args_is_help=True)
console = Console()


def _show(result: ProbeResult) -> None:
    s = result.summary
    sr = s.get("sr_estimate") or {}
    table = Table(show_header=False, box=None)
    table.add_row("status", str(s.get("status")))
    if s.get("throughput_bps") is not None:
        table.add_row("throughput", f"{s['throughput_bps'] / 1e6:.2f} Mbit/s")
    rtt = s.get("rtt") or {}
    if rtt.get("n"):
        table.add_row("RTT mean / min / p95", f"{rtt['mean_ms']:.1f} / {rtt['min_ms']:.1f} / {rtt['p95_ms']:.1f} ms")
    period = sr.get("period_ms")
    table.add_row("SR period", f"{period} ms" if period else "none named")
    table.add_row("  regime / confidence / source", f"{sr.get('regime')} / {sr.get('confidence')} / {sr.get('source')}")
    table.add_row("  ExLL T̂_SR (observation)", f"{sr.get('tsr_ms')} ms -> D_log {sr.get('d_log_ms')}")
    for line in s.get("errors") or []:
        table.add_row("[red]error[/red]", line)
    for line in s.get("missing") or []:
        table.add_row("[yellow]missing[/yellow]", line)
    table.add_row("summary", str(result.summary_path))
    console.print(table)


def _fail(exc: Exception) -> None:
    console.print(f"[red]{exc}[/red]")
    raise typer.Exit(2)


@probe_app.command()
def fetch(server: Annotated[str, typer.Argument(help="cellab-send address")],
          port: Annotated[int, typer.Option(help="cellab-send port")] = 5301,
          size_bytes: Annotated[int | None, typer.Option("--bytes", help="bytes per flow")] = None,
          seconds: Annotated[float | None, typer.Option(help="seconds per flow")] = None,
          flows: Annotated[int, typer.Option(help="concurrent flows")] = 1,
          cc: Annotated[str | None, typer.Option(help="sender congestion control (e.g. cubic)")] = None,
          control: Annotated[str, typer.Option(help="none | exll | dfcsd")] = "none",
          sr_probes: Annotated[int, typer.Option(help="idle-uplink ICMP probes before the flows (SR period)")] = 0,
          netns: Annotated[str | None, typer.Option(help="run inside this network namespace")] = None,
          out: Annotated[Path, typer.Option(help="directory for the summary and logs")] = Path("."),
          name: Annotated[str, typer.Option(help="file name prefix")] = "probe") -> None:
    """Download from cellab-send, time every packet, estimate, optionally control the window."""
    flow: dict[str, Any] = {"cc": cc}
    if size_bytes is not None:
        flow["size_bytes"] = size_bytes
    if seconds is not None:
        flow["duration_s"] = seconds
    try:
        req = validate_fetch({"server": server, "port": port, "control": control, "sr_probes": sr_probes,
                              "flows": [dict(flow, tag=i) for i in range(flows)]}, "command line")
        result = run_fetch(req, out, name, netns=netns)
    except (InputError, InputErrors, CellabError) as exc:
        _fail(exc)
    _show(result)
    raise typer.Exit(0 if result.status == "ok" else 1)


@probe_app.command()
def analyze(capture: Annotated[Path, typer.Argument(help="a pcap taken at the receiver (or a probe event log)")],
            events: Annotated[bool, typer.Option(help="the file is a probe event log, not a pcap")] = False,
            out: Annotated[Path, typer.Option(help="directory for the summary")] = Path("."),
            name: Annotated[str, typer.Option(help="file name prefix")] = "analyze") -> None:
    """The probe's estimators on a capture (SR period, bandwidth, receiver RTT)."""
    try:
        req = AnalyzeRequest(events=capture) if events else AnalyzeRequest(pcap=capture)
        result = run_analyze(req, out, name)
    except (InputError, CellabError) as exc:
        _fail(exc)
    _show(result)
    raise typer.Exit(0 if result.status == "ok" else 1)
