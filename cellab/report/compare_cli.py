"""`cellab compare`'s command, mounted by cellab/cli.py: what it imports at start-up is typer alone; the comparison
(numpy, scipy, jinja2: cellab.report.compare, compare_page) is imported when the command runs."""

from __future__ import annotations

import time
from pathlib import Path

import typer


def compare_cmd(
    result_dirs: list[Path] = typer.Argument(..., help="two or more campaign result folders; the first is the "
                                                       "reference"),
    out: Path | None = typer.Option(None, help="the folder for compare.html and compare.json (default: "
                                               "runs/out/compare-<stamp>); nothing in it is overwritten"),
) -> None:
    """Campaigns side by side: what differs in their conditions and software, then each shared cell's ratio
    (campaign ÷ the first), with its 95 % bootstrap interval and Mann–Whitney p."""
    from rich.console import Console
    from rich.markup import escape

    from cellab.paths import RUNS_OUT
    from cellab.report.compare import compare
    from cellab.report.compare_page import check_output, print_comparison, write_compare

    out = out if out is not None else RUNS_OUT / f"compare-{time.strftime('%Y%m%d-%H%M%S')}"
    result = compare(result_dirs)  # bad folders are refused before the output folder is made
    check_output(out)
    console = Console(soft_wrap=True)
    print_comparison(result, console)
    path = write_compare(result, out)
    console.print(f"compare: {escape(str(path))}", highlight=False)


def mount(app: typer.Typer) -> None:
    app.command("compare")(compare_cmd)


__all__ = ["compare_cmd", "mount"]
