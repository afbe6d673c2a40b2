"""`cellab ran ...`: check and render eNB profiles, find USRPs."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape

from cellab.errors import CellabError

app = typer.Typer(no_args_is_help=True, help="srsRAN eNB: check and render profiles, find USRPs.",
                  pretty_exceptions_enable=False, add_completion=False)
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)


def _fail(exc: CellabError) -> typer.Exit:
    err_console.print(f"[red]error:[/red] {escape(str(exc))}", markup=True, highlight=False)
    return typer.Exit(2)


@app.command("check")
def check_cmd(profile: Path = typer.Argument(..., help="eNB profile (YAML)"),
              core: Path | None = typer.Option(None, "--core", help="core profile: PLMN, TAC and MME must agree")) -> None:
    """Apply the srsENB rules to a profile, and its PLMN/TAC/MME against a core profile."""
    from cellab.contracts.identity import identity_mismatches, load_identity
    from cellab.ran.bands import carrier
    from cellab.ran.profile import identity_of, load_profile

    try:
        prof = load_profile(profile)
        if core is not None:
            problems = identity_mismatches(identity_of(prof, profile), load_identity("core", core))
            if problems:
                raise CellabError("\n".join(problems))
    except CellabError as exc:
        raise _fail(exc) from None
    for cell in prof.cells:
        c = carrier(cell.dl_earfcn)
        console.print(f"cell {cell.cell_id}: band {c.band}, DL {c.dl_mhz} MHz (EARFCN {c.dl_earfcn}), "
                      f"UL {c.ul_mhz} MHz (EARFCN {c.ul_earfcn}), {prof.enb.n_prb} PRB, TAC {cell.tac}, PCI {cell.pci}")
    console.print(f"{profile}: ok (SR {prof.sr.period_ms} ms, CQI {prof.cqi.period_ms} ms"
                  + (f"; agrees with {core}" if core else "") + ")")


@app.command("render")
def render_cmd(profile: Path = typer.Argument(..., help="eNB profile (YAML)"),
               out: Path = typer.Option(..., "--out", help="folder for enb.conf, rr.conf, sib.conf, rb.conf")) -> None:
    """Write the four srsenb config files for a profile."""
    from cellab.ran.profile import load_profile
    from cellab.ran.render import render

    from cellab.safepath import output_dir

    try:
        paths = render(load_profile(profile), output_dir(out, "--out"), profile.name)
    except CellabError as exc:
        raise _fail(exc) from None
    for path in paths:
        console.print(str(path))


@app.command("usrp")
def usrp_cmd(probe: bool = typer.Option(True, help="also run uhd_usrp_probe on each device (health, daughterboards)"),
             timeout_s: float = typer.Option(30.0, help="per command")) -> None:
    """Find USRPs (uhd_find_devices, uhd_usrp_probe) and print an inventory snippet for them."""
    from cellab.ran.usrp import discover, inventory_snippet

    try:
        devices = discover(probe=probe, timeout_s=timeout_s)
    except CellabError as exc:
        raise _fail(exc) from None
    if not devices:
        err_console.print("no USRP found (uhd_find_devices found none)")
        raise typer.Exit(1)
    console.print(inventory_snippet(devices), highlight=False, markup=False)
