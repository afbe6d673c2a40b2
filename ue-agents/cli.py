"""`cellab ue`: phones through adb — record a drive log, list phones, run the fake adb server."""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import typer
from rich.console import Console

from cellab.errors import CellabError, InputError

app = typer.Typer(no_args_is_help=True, help="Android UEs over adb: signal logs, phone list, the fake adb server.")
android_app = typer.Typer(no_args_is_help=True)
app.add_typer(android_app, name="android", help="Tools for Android UEs (the fake adb server for tests and demos).")
console = Console()
PORT_HELP = "adb server port (default: $ANDROID_ADB_SERVER_PORT, else 5037)"


@app.command("record")
def record(serial: str = typer.Option(..., help="the phone (see `adb devices -l`)"),
           out: Path = typer.Option(..., help="JSONL drive log to write (time_ms, rsrp_dbm, ... per line)"),
           adb_port: int | None = typer.Option(None, min=1, max=65535, help=PORT_HELP),
           duration_s: float | None = typer.Option(None, min=1, help="stop after this long (default: Ctrl-C)"),
           period_s: float = typer.Option(1.0, min=0.2, max=60, help="seconds between readings")) -> None:
    """Log the phone's serving-cell signal at 1 Hz: the drive log a mobility replay reads
    (a campaign's `drive_log: F.jsonl`)."""
    from cellab.ue.android.adbclient import Adb
    from cellab.ue.android.phone import Phone
    from cellab.ue.android.signallog import SignalLogger

    phone = Phone(Adb(adb_port), serial)
    phone.signal()  # a phone without LTE fails here, naming it, before an empty log is written
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    logger = SignalLogger(phone.signal, out, period_s=period_s)
    console.print(f"recording {phone.label} → {out} (Ctrl-C stops)")
    started = time.monotonic()
    with logger:
        stop.wait(duration_s)
    console.print(f"{out}: {logger.samples} readings, {logger.errors} unavailable in {time.monotonic() - started:.0f} s")


@app.command("phones")
def phones(adb_port: int | None = typer.Option(None, min=1, max=65535, help=PORT_HELP),
           as_json: bool = typer.Option(False, "--json", help="one JSON object per phone (for `cellab doctor`)")) -> None:
    """Every phone adb sees: model, Android version, root, serving-cell signal."""
    from cellab.ue.android.adbclient import Adb
    from cellab.ue.android.phone import Phone

    adb = Adb(adb_port)
    for entry in adb.devices():
        row: dict = {"serial": entry.serial, "state": entry.state}
        if entry.state == "device":
            try:
                phone = Phone(adb, entry.serial)
                row |= {"model": phone.info.model, "android": phone.info.android, "rooted": phone.info.rooted}
                row["rsrp_dbm"] = phone.signal().rsrp_dbm
            except CellabError as exc:
                row["error"] = str(exc)
        if as_json:
            print(json.dumps(row))
        else:
            console.print(row)


@android_app.command("fake-adb")
def fake_adb(port: int = typer.Option(..., min=1, max=65535, help="TCP port on 127.0.0.1 (adb -P PORT)"),
             phone: list[str] = typer.Option(None, help="SERIAL=MODEL, repeatable (default: one per recorded "
                                                        "Android version)"),
             storage: Path = typer.Option(Path("/var/tmp/cellab-fake-adb"), help="the phones' storage folders"),
             netns: list[str] = typer.Option(None, help="UE namespace the phones run programs in: one for all, "
                                                        "or one per --phone in order (phone i is the cell's UE i)"),
             cell_ctl: str | None = typer.Option(None, help="the virtual cell's control endpoint (signal source)"),
             ) -> None:
    """A fake adb server with virtual phones, for the unmodified `adb -P PORT` client."""
    from cellab.ue.android.fakeadb import FakeAdbServer
    from cellab.ue.android.phones import CATALOG, VirtualPhone
    from cellab.ue.android.testing import DEFAULT_PHONES

    pairs = dict(DEFAULT_PHONES)
    if phone:
        pairs = {}
        for spec in phone:
            serial, sep, model = spec.partition("=")
            if not sep or not serial or model not in CATALOG:
                raise InputError("--phone", "phone", f"{spec!r} is not SERIAL=MODEL",
                                 [f"SERIAL={m}" for m in CATALOG])
            pairs[serial] = model
    spaces = list(netns or [None])
    if len(spaces) not in (1, len(pairs)):
        raise InputError("--netns", "netns", f"{len(spaces)} namespaces for {len(pairs)} phones",
                         ["one --netns for every phone", "one --netns per --phone"])
    spaces = spaces * len(pairs) if len(spaces) == 1 else spaces
    try:
        server = FakeAdbServer(port)
    except OSError as exc:
        raise InputError("--port", "port", f"cannot listen on 127.0.0.1:{port}: {exc.strerror}") from None
    for index, (serial, model) in enumerate(pairs.items()):
        server.add_phone(VirtualPhone(serial, model, storage / serial, netns=spaces[index], cell_ctl=cell_ctl,
                                      cell_ue=index))
    stop = threading.Event()
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    with server:
        console.print(f"fake adb server on 127.0.0.1:{server.port} (client version {server.version}): "
                      + ", ".join(f"{s} ({m})" for s, m in pairs.items()))
        stop.wait()
