"""`cellab export` and `cellab headline`: a campaign's data out of its folder, and its answer in one or two lines.

Mounted by cellab/cli.py (`mount(app)`); the heavy imports (pandas, pyarrow, scipy) happen when a command runs.
"""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from cellab.errors import CellabError

console = Console(soft_wrap=True)


def headline_lines(result_dir: Path) -> tuple[str, list[str]]:
    """(campaign name, its headline lines) from a result folder: the report's own, computed afresh."""
    from cellab.report.headline import campaign_headline
    from cellab.report.runs import load_runs
    from cellab.results.store_check import read_folder

    folder = read_folder(Path(result_dir))
    answer = campaign_headline(load_runs(folder), folder.campaign)
    return str(folder.campaign.get("name") or folder.root.name), answer.lines


def print_headline(result_dir: Path) -> None:
    name, lines = headline_lines(result_dir)
    for line in lines:
        console.print(f"[bold]{escape(name)}[/]: {escape(line)}", highlight=False)


def headline_cmd(result_dirs: list[Path] = typer.Argument(..., help="campaign result folders")) -> None:
    """Each campaign's answer in one or two lines (the lines its report opens with)."""
    for result_dir in result_dirs:
        print_headline(result_dir)


def export_cmd(
    result_dir: Path = typer.Argument(..., help="a campaign result folder (runs/out/<campaign>-<stamp>)"),
    fmt: str = typer.Option("parquet", "--format", help="parquet | csv"),
    out: Path = typer.Option(..., help="the folder to write runs, ue_runs, timelines, comparisons and columns into "
                                       "(made when missing; an existing file there is never overwritten)"),
) -> None:
    """Write a campaign's tables (cellab.results.frames) as Parquet or CSV files."""
    from cellab.results.export import export

    if not fmt:
        raise CellabError("--format: give parquet or csv")
    for path in export(result_dir, out, fmt):
        console.print(f"wrote {escape(str(path))}", highlight=False)


def mount(app: typer.Typer) -> None:
    app.command("export")(export_cmd)
    app.command("headline")(headline_cmd)


__all__ = ["headline_lines", "mount", "print_headline"]
