"""`cellab bench ...`: paper comparisons from the command line. `table1`: C2TCP's Table I on any traces."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from cellab.errors import CellabError, InputError

from . import experiment, table1

bench_app = typer.Typer(help="Paper comparisons on the virtual cell (table1: C2TCP's Table I on any traces).",
                        no_args_is_help=True)


@bench_app.callback()
def _group() -> None:
    """Keeps `table1` a sub-command of `cellab bench`."""


@bench_app.command("table1")
def table1_cmd(
    trace: Annotated[list[Path], typer.Option(help="Mahimahi downlink trace (repeat for several)")],
    slices: Annotated[int, typer.Option(help="slices per trace (20 s each, evenly spaced)")] = table1.DEFAULT_SLICES,
    as_json: Annotated[bool, typer.Option("--json", help="one JSON object per trace, then one for the average")] = False,
) -> None:
    """Cubic and C2TCP on the paper's Table I setup (20 ms min RTT, 150 KB buffer, Target 50 ms, wired48 ACK
    path), per trace and averaged: throughputs, average and p95 queueing delays, throughput_ratio =
    C2TCP/Cubic, delay_ratio = Cubic/C2TCP average delay. Needs root (namespaces and BPF)."""
    try:
        if not 1 <= slices <= 100:
            raise InputError("command line", "--slices", f"{slices} is out of range", ["1..100"])
        table1.check_traces(trace)
    except CellabError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None
    if os.geteuid() != 0:
        typer.echo("error: cellab bench table1 needs root (network namespaces and BPF)", err=True)
        raise typer.Exit(3)

    def progress(text: str) -> None:
        if not as_json:
            typer.echo(text)

    try:
        with experiment.bpf_lock(), tempfile.TemporaryDirectory(prefix="cellab-table1-") as tmp:
            results = table1.run(trace, slices, Path(tmp), progress)
    except CellabError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(1) from None
    if as_json:
        for r in results:
            typer.echo(json.dumps(r.as_json()))
        typer.echo(json.dumps(table1.average(results)))
        return
    for row in table1.table_rows(results):
        typer.echo(row)
