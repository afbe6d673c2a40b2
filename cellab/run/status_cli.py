"""`cellab status DIR`, mounted on the command line by `mount(app)` (typer alone at start-up; the folder is read
when the command runs)."""

from __future__ import annotations

from pathlib import Path

import typer


def status(folder: Path = typer.Argument(..., help="a campaign folder: runs/out/<campaign>-<stamp>")) -> None:
    """A campaign folder's progress: runs per cell, each finished run's line, the ETA, the live `cellab run` holding
    it, and the running run's last seconds (throughput, RTT, attenuation)."""
    from cellab.run.status import status_lines

    for line in status_lines(folder):
        print(line)


def mount(app: typer.Typer) -> None:
    app.command("status")(status)
