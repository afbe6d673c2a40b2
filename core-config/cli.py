"""`cellab core ...`: render a profile, provision subscribers, run FerretDB."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console
from rich.table import Table

from cellab.errors import InputError
from cellab.inputs import check_imsi
from cellab.safepath import output_dir, write_output

from . import ferret
from .profile import FLAVOURS, CoreProfile, load_profile

app = typer.Typer(help="The core (EPC): Open5GS/NextEPC/srsEPC configs, subscribers, FerretDB.",
                  no_args_is_help=True, add_completion=False)
subscribers_app = typer.Typer(help="Subscribers in a MongoDB-wire database (K/OPc are never shown).",
                              no_args_is_help=True)
db_app = typer.Typer(help="A local FerretDB (MongoDB wire on SQLite) for labs without MongoDB.", no_args_is_help=True)
app.add_typer(subscribers_app, name="subscribers")
app.add_typer(db_app, name="db")
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)
# listings are read by scripts too: a pipe's 80 columns would cut IMSIs
wide_console = Console(soft_wrap=True, width=max(console.width, 120))


def _flavour(value: str | None, profile: CoreProfile | None) -> str:
    flavour = value or (profile.flavour if profile else "open5gs")
    if flavour not in FLAVOURS:
        raise InputError("--flavour", "flavour", f"{flavour!r} is not a flavour", allowed=FLAVOURS)
    return flavour


@app.command()
def render(profile: Path = typer.Argument(..., help="core profile YAML"),
           flavour: str = typer.Option(None, help="open5gs (2.7+) | open5gs-2.6 | nextepc | srsepc; "
                                       "default: the profile's"),
           out: Path = typer.Option(..., help="folder for the rendered files"),
           subscribers: Path = typer.Option(None, help="srsepc: CSV/YAML subscribers for user_db.csv")) -> None:
    """Render PROFILE's configuration files for one EPC flavour."""
    from .render import render as do_render
    from .subscribers import load_subscribers, srsepc_csv

    prof = load_profile(profile)
    chosen = _flavour(flavour, prof)
    csv_text = None
    if subscribers is not None:
        csv_text = srsepc_csv(load_subscribers(subscribers, profile=prof, flavour="srsepc"))
    for path in do_render(prof, chosen, output_dir(out, "--out"), subscribers_csv=csv_text):
        console.print(f"wrote {path}")


@app.command()
def identity(profile: Path = typer.Argument(..., help="core profile YAML")) -> None:
    """Print what the eNB must agree with: PLMN, TACs, S1-MME address."""
    from .profile import network_identity

    ident = network_identity(profile)
    console.print(f"PLMN {ident.mcc}-{ident.mnc}  TACs {ident.tacs}  MME {', '.join(ident.mme_addrs)}")


def _plmn(plmn: str | None, profile: Path | None) -> tuple[str, CoreProfile | None]:
    prof = load_profile(profile) if profile else None
    if prof:
        return prof.plmn.mcc + prof.plmn.mnc, prof
    if plmn is None:
        raise InputError("--plmn", "plmn", "give --plmn MCCMNC or --profile PROFILE (IMSIs must start with it)")
    if len(plmn) not in (5, 6) or not set(plmn) <= set("0123456789"):
        raise InputError("--plmn", "plmn", "MCC+MNC as 5 or 6 ASCII digits, e.g. 00101")
    return plmn, None


def _db(url: str | None, prof: CoreProfile | None, flavour: str, timeout_s: float):
    from .db import SubscriberDb, check_timeout

    check_timeout(timeout_s)  # before the URL: a bad timeout is not the database's fault
    return SubscriberDb(url or (prof.db_uri if prof else ferret.url_for(ferret.DEFAULT_PORT)), flavour, timeout_s)


TIMEOUT_HELP = "database request timeout in seconds (0 < s <= 3600)"


DB_HELP = "MongoDB URL, e.g. mongodb://127.0.0.1:27017/open5gs (default: the profile's db_uri)"


@subscribers_app.command("add")
def subscribers_add(file: Path = typer.Argument(..., help="CSV or YAML: imsi, k, opc|op, amf, apn, static_ip, "
                                                "ambr_downlink_kbps, ambr_uplink_kbps, sqn, qci"),
                    db: str = typer.Option(None, help=DB_HELP), flavour: str = typer.Option(None),
                    profile: Path = typer.Option(None, help="core profile: PLMN, db_uri, flavour"),
                    plmn: str = typer.Option(None, help="MCC+MNC digits the IMSIs start with"),
                    timeout_s: float = typer.Option(5.0, help=TIMEOUT_HELP)) -> None:
    """Validate the whole FILE, then upsert every subscriber (adding twice leaves one document each)."""
    from .subscribers import load_subscribers

    prefix, prof = _plmn(plmn, profile)
    subs = load_subscribers(file, prefix, prof)  # with a profile: its APNs and UE subnet too
    with _db(db, prof, _flavour(flavour, prof), timeout_s) as store:
        inserted, updated = store.upsert(subs, str(file))
    console.print(f"{len(subs)} subscribers: {inserted} added, {updated} updated")


@subscribers_app.command("list")
def subscribers_list(db: str = typer.Option(None, help=DB_HELP), flavour: str = typer.Option(None),
                     profile: Path = typer.Option(None), timeout_s: float = typer.Option(5.0, help=TIMEOUT_HELP)
                     ) -> None:
    """List subscribers with K and OPc masked; a stored document that is no valid subscriber is named (IMSI,
    fields) on stderr, its values never shown, and the exit status is 1."""
    prof = load_profile(profile) if profile else None
    with _db(db, prof, _flavour(flavour, prof), timeout_s) as store:
        subs, invalid = store.list_checked()
    table = Table("imsi", "k", "opc/op", "amf", "apn", "ip", "sqn", "qci")
    for column in table.columns:
        column.no_wrap = True  # an IMSI split over two lines cannot be copied or grepped
    for sub in subs:
        row = sub.masked()
        table.add_row(sub.imsi, row["k"], row["opc"] or row["op"], sub.amf, sub.apn, sub.static_ip or "dynamic",
                      str(sub.sqn), str(sub.qci))
    wide_console.print(table)
    for problem in invalid:
        err_console.print(f"invalid: {problem}", markup=False, highlight=False)
    console.print(f"{len(subs)} subscribers" + (f", {len(invalid)} invalid (not shown)" if invalid else ""))
    if invalid:
        raise typer.Exit(1)


@subscribers_app.command("remove")
def subscribers_remove(imsis: list[str] = typer.Argument(..., help="IMSIs, or a CSV/YAML file of subscribers"),
                       db: str = typer.Option(None, help=DB_HELP), flavour: str = typer.Option(None),
                       profile: Path = typer.Option(None), timeout_s: float = typer.Option(5.0, help=TIMEOUT_HELP)
                       ) -> None:
    """Remove subscribers by IMSI (or every IMSI of a file)."""
    from .subscribers import load_subscribers

    targets: list[str] = []
    for item in imsis:
        if Path(item).is_file():
            targets += [s.imsi for s in load_subscribers(item)]
        else:
            try:
                targets.append(check_imsi(item))
            except ValueError:
                raise InputError("imsis", "imsi", "an argument is neither a 15-digit IMSI nor a subscriber file",
                                 ["15 ASCII digits", "a CSV/YAML subscriber file"]) from None
    prof = load_profile(profile) if profile else None
    with _db(db, prof, _flavour(flavour, prof), timeout_s) as store:
        removed = store.remove(targets)
    console.print(f"removed {removed} of {len(targets)} subscribers")


@subscribers_app.command("export")
def subscribers_export(out: Path = typer.Argument(..., help="srsEPC user_db.csv to write"),
                       db: str = typer.Option(None, help=DB_HELP), flavour: str = typer.Option(None),
                       profile: Path = typer.Option(None), timeout_s: float = typer.Option(5.0, help=TIMEOUT_HELP)
                       ) -> None:
    """Write the database's subscribers as srsEPC's user_db.csv (mode 0600: it holds K and OPc); refused
    whole, writing nothing, when a stored subscriber is invalid."""
    from .subscribers import srsepc_csv

    prof = load_profile(profile) if profile else None
    with _db(db, prof, _flavour(flavour, prof), timeout_s) as store:
        subs = store.list()
    write_output(out, srsepc_csv(subs), "OUT", mode=0o600)
    console.print(f"wrote {len(subs)} subscribers to {out}")


@db_app.command("up")
def db_up(dir: Path = typer.Option(ferret.DEFAULT_DIR, "--dir", help="data, log and pid file"),
          port: int = typer.Option(ferret.DEFAULT_PORT, help="TCP port on 127.0.0.1")) -> None:
    """Start FerretDB (idempotent) and wait until it answers."""
    console.print(ferret.up(dir, port).line())


@db_app.command("down")
def db_down(dir: Path = typer.Option(ferret.DEFAULT_DIR, "--dir")) -> None:
    """Stop the FerretDB of that folder."""
    console.print("stopped" if ferret.down(dir) else "not running")


@db_app.command("status")
def db_status(dir: Path = typer.Option(ferret.DEFAULT_DIR, "--dir"),
              port: int = typer.Option(ferret.DEFAULT_PORT)) -> None:
    """Whether FerretDB runs and answers; exit 1 when not running."""
    state = ferret.status(dir, port)
    console.print(state.line())
    if not state.running:
        raise typer.Exit(1)
