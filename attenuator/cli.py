"""`cellab atten ...`: drive an attenuator, check and play schedules, build replays, run emulators."""

from __future__ import annotations

import json
import signal
import threading
from pathlib import Path

import typer
from rich.console import Console

from cellab.errors import InputError

atten_app = typer.Typer(help="Attenuators: set/get/info, schedules, mobility replay, device emulators.",
                        no_args_is_help=True, add_completion=False)
console = Console()

CONFIG_HELP = "YAML with one attenuator entry (or `attenuators: [...]` and --name)"


def _open(config: Path, name: str | None):
    from .config import load_config
    from .driver import create

    return create(load_config(config, name))


@atten_app.command("info")
def info_cmd(config: Path = typer.Argument(..., help=CONFIG_HELP), name: str | None = typer.Option(None)) -> None:
    """Model, serial, channels, range and step reported by the device."""
    with _open(config, name) as drv:
        console.print_json(drv.info().model_dump_json())


@atten_app.command("set")
def set_cmd(config: Path = typer.Argument(..., help=CONFIG_HELP), channel: int = typer.Argument(...),
            db: float = typer.Argument(...), name: str | None = typer.Option(None)) -> None:
    """Set one channel (quantized to the device step, checked against the lab limits, read back)."""
    with _open(config, name) as drv:
        console.print(f"channel {channel}: {drv.set(channel, db)} dB")


@atten_app.command("get")
def get_cmd(config: Path = typer.Argument(..., help=CONFIG_HELP), channel: int = typer.Argument(...),
            name: str | None = typer.Option(None)) -> None:
    """Read one channel."""
    with _open(config, name) as drv:
        console.print(f"channel {channel}: {drv.get(channel)} dB")


@atten_app.command("check")
def check_cmd(schedule: Path = typer.Argument(..., help="schedule .csv or .yaml"),
              config: Path = typer.Option(..., help=CONFIG_HELP), name: str | None = typer.Option(None)) -> None:
    """Validate a schedule against an attenuator's safety limits (no device needed)."""
    from .config import load_config
    from .driver import create
    from .schedule import SafetyLimits, check, load

    cfg = load_config(config, name)
    drv = create(cfg)  # not opened: only its declared limits are used
    checked = check(load(schedule), SafetyLimits.from_config(cfg, drv.min_interval_s))
    clip = checked.clip_report
    console.print(f"[green]ok[/] {schedule}: {len(checked.points)} points over {checked.duration_s:g} s on channels "
                  f"{checked.channels}" + (f"; clipped {clip.clipped}/{clip.total} (first: {clip.first_source})" if clip.clipped else ""))


@atten_app.command("play")
def play_cmd(schedule: Path = typer.Argument(...), config: Path = typer.Option(..., help=CONFIG_HELP),
             log: Path = typer.Option(Path("attenuation.jsonl"), help="log file (.jsonl or .csv)"),
             name: str | None = typer.Option(None)) -> None:
    """Play a schedule; Ctrl-C stops it and puts every channel in its safe state."""
    from .player import Player
    from .schedule import load

    with _open(config, name) as drv:
        player = Player(drv, load(schedule), log_path=log)
        signal.signal(signal.SIGINT, lambda *_: player.stop())
        signal.signal(signal.SIGTERM, lambda *_: player.stop())
        result = player.start().wait()
    assert result is not None
    console.print_json(result.model_dump_json())
    if result.status != "completed":
        raise typer.Exit(1)


@atten_app.command("replay")
def replay_cmd(
    drive_log: Path = typer.Argument(..., help="drive-test log (CSV or the Android agent's JSONL)"),
    calibration: Path = typer.Option(..., help="calibration JSON (from `calibrate` or the store)"),
    out: Path = typer.Option(..., help="schedule CSV to write"),
    min_db: float = typer.Option(...), max_db: float = typer.Option(...), step_db: float = typer.Option(0.25),
    channel: int = typer.Option(1), smoothing_s: float = typer.Option(0.0),
    kind: str = typer.Option("csv", help="csv | jsonl"), time_column: str = typer.Option("t_s"),
    rsrp_column: str = typer.Option("rsrp_dbm"), time_unit: str = typer.Option("s", help="s | ms | iso"),
) -> None:
    """Drive log → attenuation schedule through a calibration; reports clipping and quantization error."""
    from pydantic import ValidationError

    from cellab.errors import from_validation_error

    from cellab.safepath import write_output

    from .calibration import load_calibration
    from .mobility import DriveLogFormat, ReplayOptions, load_drive_log, replay
    from .schedule import to_csv

    try:
        fmt = DriveLogFormat(kind=kind, time_column=time_column, rsrp_column=rsrp_column, time_unit=time_unit)  # type: ignore[arg-type]
        options = ReplayOptions(channel=channel, min_db=min_db, max_db=max_db, step_db=step_db, smoothing_s=smoothing_s)
    except ValidationError as exc:
        raise from_validation_error("command line", exc) from None
    cal = load_calibration(calibration)
    result = replay(load_drive_log(drive_log, fmt), cal, options)
    write_output(out, to_csv(result.schedule), "--out")
    console.print_json(result.report.model_dump_json())


@atten_app.command("calibrate")
def calibrate_cmd(
    config: Path = typer.Argument(..., help=CONFIG_HELP), channel: int = typer.Option(1),
    cell_ctl: str = typer.Option(..., help="emulated cell control endpoint (RSRP from its stats op)"),
    ue_index: int = typer.Option(0, help="UE index in the cell's stats"),
    box: str = typer.Option(..., help="shield box name"), ue: str = typer.Option(..., help="UE name"),
    earfcn: int = typer.Option(...), store: Path = typer.Option(Path("calibrations")),
    start_db: float = typer.Option(10.0), stop_db: float = typer.Option(80.0), step_db: float = typer.Option(5.0),
    settle_s: float = typer.Option(1.0), samples: int = typer.Option(3), name: str | None = typer.Option(None),
) -> None:
    """Sweep, fit RSRP = a − b·dB, refuse a poor fit, store it per (box, UE, EARFCN)."""
    from cellab.bus.names import check_endpoint

    from .calibration import CalibrationStore, cell_rsrp_reader, check_sweep_options, fit, sweep

    check_endpoint(cell_ctl, "cellab atten calibrate", "--cell-ctl")
    check_sweep_options("cellab atten calibrate", start_db=start_db, stop_db=stop_db, step_db=step_db,
                        settle_s=settle_s, samples=samples, ue_index=ue_index, earfcn=earfcn, channel=channel)
    with _open(config, name) as drv:
        try:
            points = sweep(drv, channel, cell_rsrp_reader(cell_ctl, ue_index), start_db, stop_db, step_db,
                           settle_s=settle_s, samples=samples)
        finally:
            drv.safe_state()
    cal = fit(points, box, ue, earfcn)
    path = CalibrationStore(store).save(cal)
    console.print(f"a = {cal.a_dbm:.2f} dBm, b = {cal.b_db_per_db:.3f} dB/dB, residual RMS {cal.residual_rms_db:.2f} dB → {path}")


@atten_app.command("emulate")
def emulate_cmd(
    vendor: str = typer.Argument(..., help="minicircuits | jfw | adaura | keysight"),
    transport: str = typer.Option("serial", help="serial | telnet | http"),
    pty_link: Path | None = typer.Option(None, help="symlink for the pseudo-terminal (serial)"),
    port: int = typer.Option(0, min=0, max=65535, help="TCP port (telnet/http/keysight); 0 = any free port"),
    channels: int | None = typer.Option(None, min=1, max=16, help="channels of the box (default: the family's)"),
    cell_ctl: str | None = typer.Option(None, help="the virtual cell's control endpoint: every value the box "
                                                   "applies on channel N goes to the cell's UE N-1"),
) -> None:
    """Run a device emulator until Ctrl-C (for trying drivers by hand; with --cell-ctl, a box of any family in
    front of the virtual cell, as `cellab rehearse` uses it)."""
    dev, forwarder = _emulated_device(vendor, channels, cell_ctl)
    try:
        server, where = _serve(dev, vendor, transport, pty_link, port)
    except OSError as exc:  # the port is taken, or not ours to bind
        if forwarder is not None:
            forwarder.close()
        if transport == "serial" and vendor != "keysight":
            raise InputError("cellab atten emulate", "--pty-link", f"no pseudo-terminal: {exc}") from None
        raise InputError("cellab atten emulate", "--port", f"cannot listen on port {port}: {exc.strerror or exc}",
                         ["0 (any free port)", "a free port 1..65535"]) from None
    done = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: done.set())
    signal.signal(signal.SIGTERM, lambda *_: done.set())
    print(json.dumps({"event": "ready", "vendor": vendor, "address": where}), flush=True)
    done.wait()
    server.stop()
    if forwarder is not None:
        forwarder.close()


def _serve(dev: object, vendor: str, transport: str, pty_link: Path | None, port: int) -> tuple[object, str]:
    """The emulator's server started, and the address a driver reaches it at."""
    if vendor == "keysight":
        server = dev.serve(port)  # type: ignore[attr-defined]
        where = f"TCPIP::127.0.0.1::{server.port}::SOCKET"
    elif transport == "serial" and hasattr(dev, "serve_pty"):
        server = dev.serve_pty(str(pty_link) if pty_link else None)  # type: ignore[attr-defined]
        where = server.port
    elif transport == "telnet" and hasattr(dev, "serve_telnet"):
        server = dev.serve_telnet(port)  # type: ignore[attr-defined]
        where = server.address
    elif transport == "http" and hasattr(dev, "serve_http"):
        server = dev.serve_http(port)  # type: ignore[attr-defined]
        where = server.url
    else:
        raise InputError("command line", "transport", f"{vendor} has no {transport!r} emulator", ["serial", "telnet", "http"])
    return server, where


def _emulated_device(vendor: str, channels: int | None, cell_ctl: str | None):
    """The family's device model (with `channels`), forwarding to the cell when `cell_ctl` names one."""
    from .bridge import CellForwarder, sync_from_cell
    from .emulators.adaura import AdauraDevice
    from .emulators.jfw import JfwDevice
    from .emulators.keysight import Keysight11713C
    from .emulators.minicircuits import MiniCircuitsDevice

    families = ("minicircuits", "jfw", "adaura", "keysight")
    if vendor not in families:
        raise InputError("command line", "vendor", f"unknown {vendor!r}", list(families))
    if vendor == "keysight":
        if cell_ctl or channels:  # its banks are X+Y relay pairs: no per-channel value to forward
            raise InputError("command line", "--cell-ctl", "keysight's emulator has fixed banks and cannot drive "
                             "the cell", ["minicircuits", "jfw", "adaura"])
        return Keysight11713C(), None
    forwarder = CellForwarder(cell_ctl) if cell_ctl else None
    n = {"channels": channels} if channels else {}
    if vendor == "minicircuits":  # its model names its channel count (the driver reads it)
        model = "RCDAT-6000-110" if not channels else ("RC4DAT-6G-95" if channels <= 4 else f"RC{channels}DAT-6G-95")
        dev = MiniCircuitsDevice(model=model, on_set=forwarder, **n)
    else:
        dev = (JfwDevice if vendor == "jfw" else AdauraDevice)(on_set=forwarder, **n)
    if forwarder is not None:
        sync_from_cell(dev.att_db, forwarder)
    return dev, forwarder
