"""The `cellab` command line."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading
from pathlib import Path

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from cellab.errors import CellabError
from cellab.outdir import check_out_dir
from cellab.paths import RUNS_OUT

app = typer.Typer(help="cellab: hardware-in-the-loop LTE lab toolkit (the virtual lab is the default).",
                  no_args_is_help=True, pretty_exceptions_enable=False, add_completion=False)
console = Console(soft_wrap=True)
err_console = Console(stderr=True, soft_wrap=True)

AGENT_STOP_GRACE_S = 30.0  # after SIGTERM/SIGINT: safe state and goodbye, or the process exits anyway
# the kind an agent of a role is when --kind is not given
from cellab.contracts.registry import DEFAULT_AGENT_KIND  # noqa: E402  (re-exported: tests add kinds to it)


def _mount_rooms(argv: list[str]) -> None:
    """Rooms that ship a sub-command register it (entry point group `cellab.commands`); one that is not
    installed, or broken, leaves the rest of the command line working. A command line that names a core
    command (`cellab run ...`) or one room imports no other room's CLI: some pull in numpy and pyroute2, a
    second of start-up for every `cellab` process."""
    from cellab.contracts.registry import registered

    rooms = registered("cellab.commands")
    first = argv[1] if len(argv) > 1 else ""
    core = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands}
    core |= {g.name for g in app.registered_groups}
    chosen = {first: rooms[first]} if first in rooms else {} if first in core else rooms
    for name, target in sorted(chosen.items()):
        module, attr = target.split(":")
        try:
            sub = getattr(importlib.import_module(module), attr)
        except (ImportError, AttributeError):
            continue
        app.add_typer(sub, name=name, help=(sub.info.help or f"the {name} commands"))


@app.command()
def validate(file: Path = typer.Argument(..., help="a campaign, lab inventory, core or eNB profile, schedule, drive "
                                                   "log, calibration, subscriber file or Mahimahi trace")) -> None:
    """Check any file cellab reads, as what it is; errors name the file, field and allowed values."""
    from cellab.campaign.load import load_campaign, plan
    from cellab.campaign.validate import check_file, kind_of
    from cellab.inventory.model import address_notes, check_consistency, load_inventory

    kind = kind_of(file)  # from its contents; a bad file is refused here, naming it
    if kind not in ("campaign", "lab inventory"):
        console.print(f"[green]ok[/] {escape(check_file(file, kind))}", highlight=False)
        return
    if kind == "lab inventory":
        inventory = load_inventory(file)
        check_consistency(inventory, file)
        for note in address_notes(inventory):
            console.print(f"[yellow]note[/] {note}", highlight=False)
        console.print(f"[green]ok[/] lab inventory {inventory.name}: {len(inventory.hosts)} hosts, "
                      f"{len(inventory.agents)} agents, {len(inventory.devices.ues)} UEs")
        return
    campaign = load_campaign(file)
    if campaign.lab.endswith((".yaml", ".yml")):
        check_consistency(load_inventory(campaign.lab), campaign.lab)
    console.print(f"[green]ok[/] campaign {campaign.name}: {len(plan(campaign, file))} runs on lab {campaign.lab}")


@app.command("schema")
def schema_cmd(
    topic: str = typer.Argument("all", help="all | campaign | inventory | lab"),
    kind: str | None = typer.Argument(None, help="with lab: an embedded lab (virtual, wired, srsran-zmq, "
                                                 "virtual-android), inventory, or a LAB.yaml"),
    out: Path | None = typer.Option(None, help="write it to this file (docs/campaign.md) instead of printing"),
) -> None:
    """Every field of campaign files, run parameters and lab inventories: type, unit, default, allowed values."""
    from cellab.campaign.schema import render

    text = render(topic, kind)
    if out is None:
        sys.stdout.write(text)
        return
    from cellab.safepath import write_output

    console.print(f"wrote {write_output(out, text, '--out')}")


@app.command("plan")
def plan_cmd(campaign_file: Path, lab: str | None = typer.Option(None, help="override the campaign's lab")) -> None:
    """Print the run matrix: every factor combination × repeat, in run order."""
    from cellab.campaign.load import load_campaign, plan

    campaign = load_campaign(campaign_file, lab)
    runs = plan(campaign, campaign_file)
    rule = campaign.until
    bounds = f" (each cell {campaign.repeat}..{rule.max} runs, {rule.describe()})" if rule else ""
    table = Table(title=f"{campaign.name}: {len(runs)} runs on {campaign.lab}{bounds}")
    table.add_column("#", justify="right")
    table.add_column("run id")
    table.add_column("repeat", justify="right")
    for name in sorted(campaign.factors):
        table.add_column(name)
    for r in runs:
        table.add_row(str(r.index), r.run_id, str(r.repeat), *(str(r.factors[n]) for n in sorted(campaign.factors)))
    console.print(table)


@app.command()
def run(
    campaign_file: Path | None = typer.Argument(None, help="campaign YAML (not with --resume)"),
    lab: str | None = typer.Option(None, help="an embedded lab: virtual | wired | virtual-android | srsran-zmq; or "
                                              "a lab inventory LAB.yaml (default: the campaign's lab)"),
    resume: Path | None = typer.Option(None, help="continue an interrupted campaign folder (refused while another "
                                       "live `cellab run` holds it, naming its pid and host)"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help="with --resume: run the failed runs again too"),
    out: Path = typer.Option(RUNS_OUT, help="where campaign folders are created"),
    prefix: str | None = typer.Option(None, help="namespace prefix of the embedded lab (default: a free one)"),
    report: bool = typer.Option(True, help="write the HTML report at the end"),
    slots: int | None = typer.Option(None, help="run N runs at once on N lab instances of this host (a local Dask "
                                     "cluster)"),
    cluster: str | None = typer.Option(None, help="a Dask scheduler (tls://HOST:PORT) whose `cellab worker`s run the "
                                       "runs"),
    tls: Path | None = typer.Option(None, help="with --cluster: the folder `cellab tls` made (ca.pem, node.pem/key)"),
    insecure: bool = typer.Option(False, help="with --cluster tcp://...: accept a cluster without TLS (no "
                                  "encryption, no authentication; cluster.json and the report say so)"),
) -> None:
    """Run a campaign (or resume one); results go to runs/out/<campaign>-<stamp>/."""
    from cellab.cluster.slots import check_slots

    check_slots(slots)
    if campaign_file is not None:
        check_out_dir(out, "cellab run", "--out")  # before the lab: a file named --out ended in a traceback after it
    if slots is not None and cluster is not None:
        raise CellabError("--slots and --cluster: give one (a cluster's workers say how many slots they offer)")
    if (tls is not None or insecure) and cluster is None:
        raise CellabError("--tls and --insecure go with --cluster")
    if cluster is not None:  # before anything is written: a refused address leaves no campaign folder
        from cellab.cluster.address import check_security

        check_security(cluster, tls, insecure, "cellab run", "--cluster")
    if (campaign_file is None) == (resume is None):
        raise CellabError("give a campaign file or --resume DIR (one of them)")
    if retry_failed and resume is None:
        raise CellabError("--retry-failed goes with --resume DIR (a new campaign has no failed runs)")
    # the options checked before the cluster's and the runner's modules load (seconds of CPU): refused at once
    from cellab.cluster.dispatch import run_campaign
    from cellab.run.runner import Runner

    if resume is not None:
        if lab is not None:
            raise CellabError("--lab cannot change the lab of a campaign being resumed")
        runner = Runner.resume(resume, retry_failed=retry_failed, prefix=prefix)
    else:
        runner = Runner.new(campaign_file, out, lab=lab, prefix=prefix)
    console.print(f"results: {runner.store.root}")
    try:
        counts = run_campaign(runner, slots=slots, cluster=cluster, tls_dir=tls, insecure=insecure)
    finally:
        if report:
            from cellab.report.page import write_report  # scipy and matplotlib: seconds, only for a report

            path = write_report(runner.store.root)
            console.print(f"report: {path}")
        runner.hold.release()  # the folder is free once its report is written
    aborted = f", aborted: {counts['aborted']} (`--resume` runs them)" if counts.get("aborted") else ""
    invalid = (f", invalid: {counts['invalid']} (the lab lost real time; kept out of the statistics)"
               if counts.get("invalid") else "")
    console.print(f"runs ok: {counts['ok']}, failed: {counts['failed']}{aborted}{invalid}")
    from cellab.report.commands import print_headline

    print_headline(runner.store.root)  # the campaign's answer, last (the lines its report opens with)
    if counts["failed"] or counts.get("aborted") or counts.get("invalid"):
        raise typer.Exit(1)


@app.command("rerun")
def rerun_cmd(
    run_dir: Path = typer.Argument(..., help="a run folder: <campaign folder>/runs/<run_id>"),
    out: Path = typer.Option(RUNS_OUT, help="where the rerun's campaign folder is created"),
    prefix: str | None = typer.Option(None, help="namespace prefix of the embedded lab (default: a free one)"),
    allow_changed_files: bool = typer.Option(False, help="rerun even when a file the run depended on changed"),
) -> None:
    """Run one run again from its record (same parameters, same lab kind); what differs in the software of the
    two runs first, then both runs' results side by side."""
    from cellab.run.rerun import describe, rerun

    check_out_dir(out, "cellab rerun", "--out")
    folder, summary = rerun(run_dir, out, prefix, console=err_console, allow_changed_files=allow_changed_files)
    console.print(f"rerun: {folder}")
    console.print(describe(summary), highlight=False)
    if summary["status"] != "ok":
        raise typer.Exit(1)


@app.command("report")
def report_cmd(result_dir: Path) -> None:
    """(Re)build the HTML report of a campaign folder."""
    from cellab.report.page import write_report

    console.print(f"report: {write_report(result_dir)}")


agent_app = typer.Typer(add_completion=False)
app.add_typer(agent_app, name="agent", help="Run an agent on this host (server, ue, attenuator, enb, core); "
                                            "`cellab agent install` makes it a systemd service.")


@agent_app.callback(invoke_without_command=True)
def agent(
    ctx: typer.Context,
    role: str | None = typer.Option(None, help="server | ue | attenuator | enb | core (required)"),
    kind: str | None = typer.Option(None, help="the role's implementation (ue: virtual | android; default per role)"),
    name: str | None = typer.Option(None, help="agent name (its routing identity) (required)"),
    controller: str | None = typer.Option(None, help="controller endpoint, e.g. tcp://10.0.0.1:7700 (required)"),
    key: Path | None = typer.Option(None, help="this agent's CURVE secret key file (required)"),
    controller_key: list[Path] | None = typer.Option(None, help="allowed controller public key file(s) (required)"),
    telemetry: str | None = typer.Option(None, help="controller telemetry endpoint (default: the controller's "
                                                    "host, port + 1); off: no telemetry"),
    netns: str | None = typer.Option(None, help="run workloads inside this network namespace"),
    artifact_dir: Path = typer.Option(Path("/var/tmp/cellab-artifacts"), help="where artifacts are kept"),
    cell_ctl: str | None = typer.Option(None, help="ue role in the virtual lab: the emulated cell's control "
                                                   "endpoint, where the agent reads its signal"),
    cell_ue: int = typer.Option(0, min=0, help="ue role with --cell-ctl: this UE's index in the cell"),
    serial: str | None = typer.Option(None, help="ue role, kind android: the phone's serial (`adb devices -l`)"),
    adb_port: int | None = typer.Option(None, min=1, max=65535, help="ue role, kind android: the adb server's "
                                                                  "port (default: $ANDROID_ADB_SERVER_PORT, else 5037)"),
    srsran_bin: Path | None = typer.Option(None, help="enb/core roles: a folder with srsenb/srsepc (an srsRAN "
                                                      "bundle's bin; its ../lib/sctpshim.so is preloaded for srsepc "
                                                      "on kernels without SCTP)"),
) -> None:
    """Run an agent on this host: it connects to the controller and executes typed operations only."""
    from cellab.contracts.registry import agent_class
    from cellab.inventory.agent_install import TELEMETRY_OFF_WARNING, resolve_telemetry

    if ctx.invoked_subcommand is not None:
        return
    missing = [f"--{n.replace('_', '-')}" for n, v in (("role", role), ("name", name), ("controller", controller),
                                                       ("key", key), ("controller_key", controller_key)) if not v]
    if missing:
        raise CellabError(f"cellab agent needs {', '.join(missing)} (see `cellab agent --help`)")
    assert role and name and controller and key and controller_key
    telemetry = resolve_telemetry(controller, telemetry)
    if telemetry is None:
        err_console.print(f"[yellow]{TELEMETRY_OFF_WARNING}[/]", highlight=False)
    if role not in DEFAULT_AGENT_KIND:
        raise CellabError(f"--role {role!r} is not a known role (allowed: {', '.join(DEFAULT_AGENT_KIND)})")
    cls = agent_class(role, kind or DEFAULT_AGENT_KIND[role])
    kwargs: dict = {"netns": netns} if netns else {}
    if cell_ctl is not None:
        if role != "ue":
            raise CellabError(f"--cell-ctl is for the ue role, not {role}")
        kwargs |= {"cell_ctl": cell_ctl, "cell_ue": cell_ue}
    if kind == "android":
        kwargs |= {"serial": serial, "adb_port": adb_port}
    if srsran_bin is not None:
        kwargs |= _srsran_kwargs(role, srsran_bin)
    instance = cls(name, controller, telemetry_endpoint=telemetry, secret_key_file=key,
                   controller_public_keys=list(controller_key), artifact_dir=artifact_dir, **kwargs)
    instance.set_start_options(_start_options(ctx))

    def stop(*_: object) -> None:
        # A stop that cannot finish (an operation that never returns, a pool that will not drain) must not
        # keep the agent alive after its controller is gone: the process ends by itself after the grace time.
        watchdog = threading.Timer(AGENT_STOP_GRACE_S, os._exit, args=(1,))
        watchdog.daemon = True
        watchdog.start()
        instance.stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    print(instance.start_line(), file=sys.stderr, flush=True)  # the controller logs the same when it connects
    instance.serve_forever()


def _mount_agent_install() -> None:
    from cellab.inventory.agent_install import install_command

    agent_app.command("install")(install_command)


_mount_agent_install()


def _start_options(ctx: typer.Context) -> dict[str, str | None]:
    """The host-only options `cellab agent` was given (cellab.bus.start_options), as the agent says them in its hello:
    the artifact folder only when it is not the default."""
    from click.core import ParameterSource

    given = {name: None if value is None else str(value) for name, value in ctx.params.items()
             if name in ("kind", "serial", "adb_port", "netns", "cell_ctl", "srsran_bin")}
    own_folder = ctx.get_parameter_source("artifact_dir") not in (None, ParameterSource.DEFAULT)
    return given | {"cell_ue": str(ctx.params["cell_ue"]) if ctx.params.get("cell_ctl") else None,
                    "artifact_dir": str(ctx.params["artifact_dir"]) if own_folder else None}


def _srsran_kwargs(role: str, folder: Path) -> dict:
    """--srsran-bin: the enb agent's srsenb; the core agent's srsepc (and the bundle's SCTP shim, preloaded
    when the kernel has no SCTP)."""
    if role not in ("enb", "core"):
        raise CellabError(f"--srsran-bin is for the enb and core roles, not {role}")
    if not folder.is_dir():
        raise CellabError(f"--srsran-bin {folder}: not a folder")
    if role == "enb":
        return {"srsenb_bin": folder / "srsenb"}
    shim = folder.resolve().parent / "lib" / "sctpshim.so"
    env = {"LD_PRELOAD": str(shim)} if shim.is_file() and not Path("/proc/net/sctp").exists() else {}
    return {"programs": {"srsepc": str(folder / "srsepc")}, "env": env}


trace_app = typer.Typer(no_args_is_help=True)
app.add_typer(trace_app, name="trace", help="Link traces for the virtual cell: from probe recordings; sample data.")


@trace_app.command("from-probe")
def trace_from_probe_cmd(log: Path = typer.Argument(..., help="cellab-probe --ms-log or --log of a saturating download"),
                         out: Path = typer.Option(..., help="Mahimahi trace to write (e.g. commercial.down)")) -> None:
    """A recording of a network (probe on a phone or a host) → a trace the virtual cell plays (`trace:`)."""
    from cellab.campaign.traces import trace_from_probe_log, write_mahimahi

    opportunities = trace_from_probe_log(log)
    write_mahimahi(out, opportunities)
    mbit = len(opportunities) * 1500 * 8 / opportunities[-1] / 1000
    console.print(f"{out}: {len(opportunities)} opportunities over {opportunities[-1] / 1000:.1f} s ({mbit:.1f} Mbit/s)")


@trace_app.command("samples")
def trace_samples_cmd(folder: Path = typer.Argument(Path("runs/data"), help="where to write them")) -> None:
    """Write the synthetic sample drive log and commercial trace the example campaigns use."""
    from cellab.campaign.traces import write_samples
    from cellab.safepath import output_dir

    for kind, path in write_samples(output_dir(folder, "FOLDER")).items():
        console.print(f"{kind}: {path}")


@app.command()
def doctor(
    lab: Path | None = typer.Option(None, "--lab", help="a lab inventory: check its agents and devices from this "
                                                        "controller instead of this host"),
    fix: bool = typer.Option(False, help="with --lab: prepare the phones (Wi-Fi off, mobile data on, awake); "
                                         "nothing else is ever changed"),
    connect_timeout_s: float = typer.Option(5.0, "--connect-timeout", min=0.5, max=120,
                                            help="with --lab: how long to wait for the agents to connect (s)"),
    max_offset_ms: float = typer.Option(10.0, "--max-offset-ms", min=0,
                                        help="with --lab: clock offsets beyond this are warned about"),
) -> None:
    """Check this host for what cellab needs; each problem comes with what to do. With --lab, the whole lab:
    a go/no-go row per agent and device (exit 1 when any fails)."""
    if lab is not None:
        _lab_doctor(lab, fix, connect_timeout_s, max_offset_ms)
        return
    if fix:
        raise CellabError("--fix prepares a lab's phones: give the lab inventory with --lab LAB.yaml")
    from cellab.inventory.host_check import run_checks

    table = Table(title="cellab doctor")
    for column in ("check", "status", "detail"):
        table.add_column(column)
    failed = False
    for check in run_checks():
        style = {"ok": "green", "missing": "red", "warn": "yellow", "none": "dim"}[check.status]
        table.add_row(check.name, f"[{style}]{check.status}[/]", check.detail)
        failed |= check.status == "missing" and check.required
    console.print(table)
    if failed:
        raise typer.Exit(1)


def _lab_doctor(lab: Path, fix: bool, connect_timeout_s: float, max_offset_ms: float) -> None:
    """`cellab doctor --lab`: the table of cellab.inventory.doctor's rows; a bad inventory is an input error (exit 2)."""
    from cellab.inventory.doctor import DoctorOptions, failed, lab_doctor

    rows = lab_doctor(lab, DoctorOptions(connect_timeout_s=connect_timeout_s, max_clock_offset_ms=max_offset_ms,
                                         fix=fix))
    table = Table(title=f"cellab doctor --lab {lab}")
    for column in ("agent / device", "check", "status", "detail"):
        table.add_column(column)
    for row in rows:
        style = {"ok": "green", "warn": "yellow", "fail": "red"}[row.status]
        table.add_row(row.name, row.check, f"[{style}]{row.status}[/]", row.detail)
    console.print(table)
    verdict = "no-go: fix the rows marked fail" if failed(rows) else "go" + (" (with warnings)" if any(
        r.status == "warn" for r in rows) else "")
    console.print(verdict, highlight=False)
    if failed(rows):
        raise typer.Exit(1)


def _mount_rehearse() -> None:
    from cellab.inventory.rehearse_cli import rehearse_app

    app.add_typer(rehearse_app, name="rehearse", help="A lab inventory rehearsed on this host: emulated devices, "
                                                      "real agents (up NAME | down NAME | list).")


def _mount_keys() -> None:
    from cellab.bus.cli import keys_app

    app.add_typer(keys_app, name="keys", help="Make CURVE key pairs (secret files 0600).")


def _mount_results() -> None:
    from cellab.report.commands import mount

    mount(app)


def _mount_compare() -> None:
    from cellab.report.compare_cli import mount  # typer alone: the comparison is imported when it runs

    mount(app)


def _mount_status() -> None:
    from cellab.run.status_cli import mount  # typer alone: the folder is read when the command runs

    mount(app)


def _mount_scale() -> None:
    from cellab.cluster.cli import mount

    mount(app)


def _mount_fidelity() -> None:
    from cellab.fidelity.cli import mount

    mount(app)


_mount_keys()
_mount_rehearse()
_mount_scale()
_mount_fidelity()
_mount_compare()
_mount_results()
_mount_status()
_mount_rooms(sys.argv)  # last: it tells the core commands mounted above from the rooms'


def main() -> None:
    try:
        app()
    except CellabError as exc:
        # the message as text, not markup: a pattern it quotes ([a-z0-9]) or a hostile name is not a style tag
        err_console.print(f"[red]error:[/] {escape(str(exc))}", highlight=False, soft_wrap=True)
        sys.exit(2)
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]: finished runs are stored; continue with --resume")
        sys.exit(130)
