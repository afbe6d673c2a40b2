"""`cellab fidelity`: one fidelity case on both labs (srsran-zmq first, then the virtual cell on each real
repeat's stack clock), each metric's virtual/real ratio with its interval and verdict; the exit status says
whether the case passed.

    cellab fidelity --n-prb 25 --sr-period-ms 20 --case cubic --repeats 5

Exit status: 0 every metric passed (or is a known deviation), 1 a metric failed, 3 no failure but a metric
undecided or not measured (more repeats, or a lab's reason), 4 not run (no root or no srsRAN bundle); bad
options: 2.
"""

from __future__ import annotations

from pathlib import Path

import typer

from cellab.errors import InputError
from cellab.paths import RUNS_OUT

N_PRB = (6, 15, 25, 50, 75, 100)
SR_PERIOD_MS = (5, 10, 20, 40, 80)
# --case -> the glob of the grid's case names it runs ({n}: n_prb, {p}: SR period); docs/fidelity.md "Cases"
CASES = {"idle": "idle-{n}prb-sr{p}", "cubic": "dl-cubic-{n}prb", "loaded": "dl-cubic-{n}prb",
         "bbr": "dl-bbr-{n}prb", "upload": "ul-cubic-{n}prb", "snr": "snr-*", "two-ue": "two-ue-{n}prb",
         "recovery": "recovery-{n}prb", "all": "*"}
MAX_REPEATS = 50
EXIT_FAIL, EXIT_UNDECIDED, EXIT_NOT_RUN = 1, 3, 4
OUT_DIR = RUNS_OUT / "fidelity-case"


def case_grid(n_prb: int, sr_period_ms: int, repeats: int):  # -> cellab.fidelity.cases.Grid
    """A grid of every case at one n_prb and SR period (the downloads take that SR period too)."""
    from cellab.fidelity.cases import FULL, Grid

    return Grid(n_prb=(n_prb,), sr_period_ms=(sr_period_ms,), download_ccs=("cubic", "bbr"),
                download_n_prb=(n_prb,), snr_db=FULL.snr_db, shared_n_prb=n_prb, upload_n_prb=(n_prb,),
                recovery_n_prb=(n_prb,), repeats=repeats, download_sr_ms=sr_period_ms)


def check_options(n_prb: int, sr_period_ms: int, repeats: int, case: str) -> str:
    """The glob of case names the options select; InputError naming the option and the allowed values."""
    if n_prb not in N_PRB:
        raise InputError("cellab fidelity", "--n-prb", f"{n_prb} is not a cell bandwidth", N_PRB)
    if sr_period_ms not in SR_PERIOD_MS:
        raise InputError("cellab fidelity", "--sr-period-ms", f"{sr_period_ms} is not an SR period", SR_PERIOD_MS)
    if not 1 <= repeats <= MAX_REPEATS:
        raise InputError("cellab fidelity", "--repeats", f"{repeats} repeats per lab", [f"1..{MAX_REPEATS}"])
    if case not in CASES:
        raise InputError("cellab fidelity", "--case", f"{case!r} is not a case", list(CASES))
    return CASES[case].format(n=n_prb, p=sr_period_ms)


def exit_status(rows: list) -> int:
    """0 passed, EXIT_FAIL when a metric failed, EXIT_UNDECIDED when none failed but one is not decided."""
    kinds = [row.verdict.split()[0].rstrip(":") for row in rows]
    if "FAIL" in kinds:
        return EXIT_FAIL
    if not rows or any(k in ("undecided", "not") for k in kinds):
        return EXIT_UNDECIDED
    return 0


def fidelity_command(
        n_prb: int = typer.Option(..., "--n-prb", help="cell bandwidth in PRBs: " + ", ".join(map(str, N_PRB))),
        sr_period_ms: int = typer.Option(..., "--sr-period-ms", help="SR period (ms): the idle case's, and the "
                                         "downloads' (the bench's grid uses 20)"),
        repeats: int = typer.Option(5, "--repeats", help="runs per case and lab (the interval needs >= 2)"),
        case: str = typer.Option("all", "--case", help="which case: " + ", ".join(CASES) + " (loaded: the Cubic "
                                 "download's RTT under load and throughput, as cubic)"),
        out: Path = typer.Option(OUT_DIR, "--out", help="output folder: campaign folders, clocks, fidelity.html"),
) -> None:
    """One fidelity case on srsran-zmq and on the virtual cell run on the real runs' own stack clocks: each metric's
    virtual/real ratio, its 95 % interval and verdict; exit 1 when the case fails (docs/fidelity.md)."""
    from cellab.fidelity import bench

    pattern = check_options(n_prb, sr_period_ms, repeats, case)
    why = bench.srsran_missing()
    if why:
        typer.echo(f"fidelity: not run: {why}")
        raise typer.Exit(EXIT_NOT_RUN)
    rows = bench.run(f"n_prb {n_prb}, SR {sr_period_ms} ms", out, pattern,
                     case_grid(n_prb, sr_period_ms, repeats))
    status = exit_status(rows)
    typer.echo({0: "fidelity: the case passed", EXIT_FAIL: "fidelity: the case FAILED",
                EXIT_UNDECIDED: "fidelity: not decided (undecided or not measured metrics)"}[status])
    raise typer.Exit(status)


def mount(app: typer.Typer) -> None:
    app.command("fidelity")(fidelity_command)
