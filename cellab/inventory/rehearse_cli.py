"""`cellab rehearse up|down|list`: the rehearsal lab from the command line (cellab.inventory.rehearse)."""

from __future__ import annotations

from pathlib import Path

import typer

rehearse_app = typer.Typer(no_args_is_help=True, add_completion=False)
ROOT_HELP = "where rehearsals keep their folders (default: runs/rehearse)"


def _root(root: Path | None) -> Path:
    from cellab.inventory.rehearse import REHEARSE_ROOT

    return root or REHEARSE_ROOT


@rehearse_app.command("up")
def up_cmd(
    name: str = typer.Argument(..., help="the rehearsal's name (its folder runs/rehearse/NAME)"),
    radio: str = typer.Option("virtual", help="virtual (the emulated cell) | srsran-zmq (srsenb, srsue and srsEPC "
                                              "over ZMQ: root, the srsRAN bundle)"),
    phones: int | None = typer.Option(None, min=0, max=16, help="virtual phones behind the fake adb server (Android "
                                                                "agents; default 1, none on srsran-zmq)"),
    virtual_ues: int = typer.Option(1, min=0, max=16, help="virtual UEs on the cell, or srsue on srsran-zmq "
                                                            "(1..4; virtual UE agents)"),
    atten_family: str = typer.Option("minicircuits", help="the emulated box: minicircuits (serial) | jfw (telnet) "
                                                          "| adaura (http) | virtual (the cell's own socket)"),
    root: Path | None = typer.Option(None, help=ROOT_HELP),
) -> None:
    """Bring up on this host the emulated devices and the real agents of a lab inventory; write the inventory
    and its keys into the rehearsal's folder. Then `cellab doctor --lab FOLDER/lab.yaml` and campaigns with
    `lab: FOLDER/lab.yaml`, as on the hardware."""
    from cellab.inventory.rehearse import RehearsalSpec, up

    if phones is None:
        phones = 0 if radio == "srsran-zmq" else 1
    rehearsal = up(RehearsalSpec(name, radio, phones, virtual_ues, atten_family, _root(root)), say=typer.echo)
    typer.echo(f"rehearsal {name}: up in {rehearsal.up_s:.1f} s; inventory {rehearsal.inventory}; each process's "
               f"output in {rehearsal.folder / 'logs'}")
    if radio == "srsran-zmq":
        typer.echo("srsenb and srsEPC start with a campaign's first run (through the eNB and core agents); srsue "
                   f"follows each srsenb ({rehearsal.folder / 'stack' / 'stack_events.jsonl'})")
    typer.echo(f"next: cellab doctor --lab {rehearsal.inventory}")
    typer.echo(f"then: cellab run CAMPAIGN --lab {rehearsal.inventory}; at the end: cellab rehearse down {name}")


@rehearse_app.command("down")
def down_cmd(name: str = typer.Argument(..., help="the rehearsal to take down"),
             root: Path | None = typer.Option(None, help=ROOT_HELP)) -> None:
    """Stop the rehearsal's agents, box, phones and cell and remove its namespaces (its folder stays)."""
    from cellab.inventory.rehearse import down

    down(name, _root(root), say=typer.echo)


@rehearse_app.command("restart")
def restart_cmd(name: str = typer.Argument(..., help="the rehearsal"),
                process: str = typer.Argument(..., help="one of its processes: an agent (server1, atten1, phone1, "
                                                        "ue1, enb1, core1, ...), atten-emulator, fake-adb or "
                                                        "zmq-stack"),
                root: Path | None = typer.Option(None, help=ROOT_HELP)) -> None:
    """Start a process of the rehearsal again with its recorded command (after killing an agent on purpose, as
    a lab host's service manager would restart it)."""
    from cellab.inventory.rehearse import restart

    started = restart(name, process, _root(root))
    typer.echo(f"rehearsal {name}: {process} started again (pid {started.pid}, log {started.log})")


@rehearse_app.command("list")
def list_cmd(root: Path | None = typer.Option(None, help=ROOT_HELP)) -> None:
    """Every rehearsal that is up (or whose processes died: `down` cleans it), with its inventory."""
    from cellab.inventory.rehearse import list_rehearsals

    found = list_rehearsals(_root(root))
    for item in found:
        live = item.live()
        state = "up" if len(live) == len(item.processes) else \
            f"{len(item.processes) - len(live)} of {len(item.processes)} processes gone " \
            f"({', '.join(p.name for p in item.processes if p not in live)}): `cellab rehearse down {item.name}`"
        typer.echo(f"{item.name}: {state}; radio {item.radio}, cell {item.prefix}, inventory {item.inventory}")
    if not found:
        typer.echo("no rehearsals are up")
