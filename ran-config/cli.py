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


@app.command("ue-conf")
def ue_conf_cmd(profile: Path = typer.Argument(..., help="the inventory's eNB profile (rf.device kind zmq)"),
                netns: str = typer.Option(..., help="the UE's network namespace: srsue puts its TUN there "
                                                    "([gw] netns); the UE agent runs with --netns NETNS"),
                out: Path = typer.Option(..., help="the ue.conf to write (srsue's log and metrics beside it)"),
                index: int = typer.Option(0, min=0, max=15, help="the UE's USIM and ZMQ id (0: the srsRAN example "
                                                                 "SIM, row ue1 of core-config/examples/"
                                                                 "subscribers-srsran-zmq.csv)")) -> None:
    """srsue's ue.conf for an inventory whose eNB is srsenb over ZMQ on this host (the eNB agent renders it from
    PROFILE): ZMQ to the profile's ports at its base_srate, its first cell's EARFCN, rendered as the srsran-zmq
    lab renders a UE's; then `srsue ue.conf` (root, after srsenb started)."""
    from cellab.ran.profile import load_profile
    from cellab.ran.srsue_proc import UeSettings, render_ue_conf, ue_usim
    from cellab.safepath import write_output

    try:
        enb = load_profile(profile)
    except CellabError as exc:
        raise _fail(exc) from None
    device = enb.rf.device
    if device.kind != "zmq":
        raise _fail(CellabError(f"{profile}: rf.device is {device.kind}, not zmq: srsue over ZMQ needs a ZMQ eNB"))
    settings = UeSettings(dl_earfcn=enb.cells[0].dl_earfcn, n_prb=enb.enb.n_prb, base_srate_hz=device.base_srate_hz)
    folder = out.resolve().parent
    enb_tx, enb_rx = (int(port.rpartition(":")[2]) for port in (device.tx_port, device.rx_port))
    text = render_ue_conf(settings, netns, folder / f"srsue{index}.log", folder / f"srsue{index}_metrics.csv",
                          tx_port=enb_rx, rx_port=enb_tx, index=index)
    written = write_output(out, text, "--out")
    console.print(f"{escape(str(written))}: srsue {index} (IMSI {ue_usim(index)['imsi']}) in namespace "
                  f"{escape(netns)}, ZMQ to "
                  f"srsenb's {enb_tx}/{enb_rx}; start it with: srsue {escape(str(written))}", highlight=False)


@app.command("zmq-stack")
def zmq_stack_cmd(folder: Path = typer.Option(..., help="where srsue's and the broker's files, the stack's events "
                                                        "and clock go (a rehearsal's FOLDER/stack)"),
                  ues: int = typer.Option(1, min=1, max=4, help="srsue instances (the srsran-zmq lab's UEs)"),
                  srsran_bin: Path | None = typer.Option(None, help="srsRAN 4G's bin folder (default: "
                                                                    "$CELLAB_SRSRAN_BIN, the shared bundle, PATH)"),
                  prefix: str | None = typer.Option(None, help="lab prefix (default: a free czq, czq2, ...)")) -> None:
    """The srsran-zmq radio of a rehearsal lab (root), in the foreground until SIGTERM: the srsRAN host lock, the
    namespaces, the attenuation control; srsenb and the EPC are the inventory's agents', srsue and the ZMQ broker
    are started here for each srsenb that starts (zmq_stack.py). `cellab rehearse up NAME --radio srsran-zmq`
    runs it; prints a JSON ready line."""
    from cellab.ran.zmq_stack import run_stack

    try:
        run_stack(folder, ues, srsran_bin, prefix)
    except CellabError as exc:
        raise _fail(exc) from None
