"""`cellab rehearse`: a lab inventory's whole path on this one host, before the hardware: the virtual cell as
the radio, virtual phones behind the fake adb server, an emulated attenuator box of a real family bridged to the
cell, and the real agents (`cellab agent`, over CURVE) for all of them; the inventory and its keys written into
one folder; everything taken down again by name. With `--radio srsran-zmq` the radio is the real srsRAN stack
(rehearse_zmq: srsenb and the EPC through the inventory's eNB and core agents, srsue by the RAN room's stack).

The rooms are reached through their command lines only (the core imports no room): `cellab vlab up|down` (the
cell and its namespaces), `cellab atten emulate FAMILY --cell-ctl` (the box), `cellab ue android fake-adb`
(the phones), `cellab agent` (every agent). Each is a detached process recorded in `rehearsal.json`
(rehearse_procs), so `cellab rehearse down NAME` stops exactly those."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from cellab.errors import CellabError, InputError
from cellab.inputs import check_name
from cellab.inventory import rehearse_procs as procs
from cellab.inventory import rehearse_zmq
from cellab.inventory.rehearse_inventory import Box, Layout, box_for, inventory_of
from cellab.labs import instances
from cellab.paths import PROJECT_ROOT
from cellab.safepath import output_dir, write_file

REHEARSE_ROOT = PROJECT_ROOT / "runs" / "rehearse"
STATE = "rehearsal.json"
RADIOS = ("virtual", "srsran-zmq")
MAX_UES = 16  # the virtual cell's
START_TIMEOUT_S = 120.0  # an agent's start (Python imports on a busy host: 73 s for all measured here), an adb server
CLI = [sys.executable, "-m", "cellab"]
PHONE_MODEL = "android14"  # rooted: the phone's cc and tcpdump work
DEVICES = ("atten-emulator", "fake-adb", "zmq-stack")  # the processes that are not agents
PREPARE = (("svc", "wifi", "disable"), ("svc", "data", "enable"), ("svc", "power", "stayon", "true"))


@dataclass
class RehearsalSpec:
    name: str
    radio: str = "virtual"
    phones: int = 1
    virtual_ues: int = 1
    atten_family: str = "minicircuits"
    root: Path = REHEARSE_ROOT

    def check(self) -> None:
        check_name(self.name, "rehearsal name", max_len=32)
        if self.radio not in RADIOS:
            raise InputError("cellab rehearse up", "--radio", f"unknown {self.radio!r}", list(RADIOS))
        if self.radio == "srsran-zmq":
            rehearse_zmq.check(self.phones, self.virtual_ues, self.atten_family)
        total = self.phones + self.virtual_ues
        if self.phones < 0 or self.virtual_ues < 0 or not 1 <= total <= MAX_UES:
            raise InputError("cellab rehearse up", "--phones/--virtual-ues", f"{self.phones} phones and "
                             f"{self.virtual_ues} virtual UEs", [f"1..{MAX_UES} UEs in all"])
        box_for(self.atten_family, total)  # an unknown family is refused naming the known ones
        if self.phones and shutil.which("adb") is None:
            raise InputError("cellab rehearse up", "--phones", "the phones are reached through Debian's adb client, "
                             "which is not installed (make setup)", ["0 without adb"])


@dataclass
class Rehearsal:
    """What `rehearsal.json` holds: enough to list it and take it down."""
    name: str
    folder: Path
    radio: str = "virtual"
    prefix: str = ""
    cell_ctl: str = ""
    adb_port: int = 0  # the fake adb server's: `adb -P PORT` reaches the phones
    inventory: str = ""
    processes: list[procs.Started] = field(default_factory=list)
    start_lines: list[str] = field(default_factory=list)
    up_s: float = 0.0

    def save(self) -> None:
        data = {"name": self.name, "radio": self.radio, "prefix": self.prefix, "cell_ctl": self.cell_ctl,
                "adb_port": self.adb_port, "inventory": self.inventory,
                "processes": [p.as_dict() for p in self.processes], "start_lines": self.start_lines,
                "up_s": round(self.up_s, 1)}
        write_file(self.folder, STATE, json.dumps(data, indent=2) + "\n")

    @classmethod
    def load(cls, folder: Path) -> Rehearsal:
        try:
            data = json.loads((folder / STATE).read_text())
            return cls(str(data["name"]), folder, str(data["radio"]), str(data["prefix"]), str(data.get("cell_ctl", "")),
                       int(data.get("adb_port", 0)), str(data["inventory"]),
                       [procs.Started(**p) for p in data["processes"]], list(data.get("start_lines", [])),
                       float(data.get("up_s", 0)))
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise CellabError(f"{folder / STATE}: not a rehearsal's record ({exc})") from None

    def live(self) -> list[procs.Started]:
        return [p for p in self.processes if procs.alive(p)]


def folder_of(name: str, root: Path = REHEARSE_ROOT) -> Path:
    return Path(root) / check_name(name, "rehearsal name", max_len=32)


def up(spec: RehearsalSpec, say: Callable[[str], None] = print) -> Rehearsal:
    """Bring the rehearsal lab up and write its inventory; on any failure, take down what was started."""
    spec.check()
    folder = folder_of(spec.name, spec.root)
    if (folder / STATE).exists():
        raise CellabError(f"rehearsal {spec.name!r} is already up ({folder / STATE}): `cellab rehearse down "
                          f"{spec.name}` first")
    output_dir(folder, "rehearsal folder")
    for sub in ("keys", "logs", "artifacts", "phones"):
        output_dir(folder / sub, "rehearsal folder")
    started = time.monotonic()
    rehearsal = Rehearsal(spec.name, folder, spec.radio)
    try:
        _bring_up(spec, rehearsal, say)
    except BaseException:
        if (folder / STATE).exists():  # recorded from the cell on
            say(f"rehearsal {spec.name}: start failed, taking down what was started")
            try:
                down(spec.name, spec.root, say=lambda _: None)
            except CellabError as exc:  # said, but the reason the start failed is the error
                say(f"rehearsal {spec.name}: {exc}")
        raise
    rehearsal.up_s = time.monotonic() - started
    rehearsal.save()
    return rehearsal


def _bring_up(spec: RehearsalSpec, rehearsal: Rehearsal, say: Callable[[str], None]) -> None:
    folder = rehearsal.folder
    radio: dict | None = None
    if spec.radio == "srsran-zmq":
        radio = rehearse_zmq.stack_up(spec.virtual_ues, folder, lambda n, argv: _spawn(rehearsal, n, argv), CLI, say)
        cell = {"prefix": radio["prefix"], "ctl": radio["attenuation_ctl"], "ues": radio["ue_ns"],
                "server": (radio["srv_ns"], radio["server"])}
        say(f"radio: srsran-zmq, lab instance {cell['prefix']} (srsRAN host lock held); srsue starts with each "
            f"srsenb the eNB agent starts (events: {folder / 'stack' / 'stack_events.jsonl'})")
    else:
        cell = _cell_up(spec.phones + spec.virtual_ues, folder)
        say(f"cell: lab instance {cell['prefix']} (`cellab vlab status`), control {cell['ctl']}")
    rehearsal.prefix, rehearsal.cell_ctl = cell["prefix"], cell["ctl"]
    rehearsal.save()  # from here on, `down` finds the cell
    layout = Layout(spec.name, spec.phones, spec.virtual_ues, cell["server"], procs.free_ports(2),
                    radio=spec.radio)
    box = _box_up(spec.atten_family, layout.total, cell["ctl"], rehearsal)
    serials = _phones_up(layout, cell, rehearsal) if spec.phones else []
    agents = _agents_up(layout, cell, serials, rehearsal, radio)
    rehearsal.start_lines = [procs.wait_line(proc, f"agent {proc.name}:", START_TIMEOUT_S) for proc in agents]
    for line in rehearsal.start_lines:
        say(line)
    data = inventory_of(layout, box, serials)
    if radio is not None:
        data["devices"] |= rehearse_zmq.devices(radio, layout.enb_agent, layout.core_agent)
    path = write_file(folder, "lab.yaml", "# written by `cellab rehearse up`; `cellab rehearse down "
                      f"{spec.name}` stops it\n" + _yaml(data))
    rehearsal.inventory = str(path)
    rehearsal.save()
    _check_inventory(path)


def _yaml(data: dict) -> str:
    import yaml

    return yaml.safe_dump(data, sort_keys=False)


def _check_inventory(path: Path) -> None:
    from cellab.inventory.model import check_consistency, load_inventory

    check_consistency(load_inventory(path), path)


def _cell_up(ues: int, folder: Path) -> dict:
    """`cellab vlab up` (the cell keeps its instance's lease): its prefix, server and UE namespaces, control."""
    done = subprocess.run([*CLI, "vlab", "up", "--ues", str(ues)], capture_output=True, text=True, timeout=120)
    write_file(folder / "logs", "vlab-up.log", done.stdout + done.stderr)
    if done.returncode != 0:
        raise CellabError(f"cellab vlab up failed: {(done.stderr or done.stdout).strip()[-600:]}")
    cell: dict = {"ues": []}
    for line in done.stdout.splitlines():
        words = line.split()
        if words[:1] == ["prefix"]:
            cell["prefix"] = words[1]
        elif words[:1] == ["server"]:
            cell["server"] = (words[1], words[2])
        elif words[:1] == ["control"]:
            cell["ctl"] = words[1]
        elif len(words) == 3 and words[0].startswith("ue"):
            cell["ues"].append(words[1])
    if not {"prefix", "server", "ctl"} <= set(cell) or len(cell["ues"]) != ues:
        raise CellabError(f"cellab vlab up said something unexpected:\n{done.stdout[-600:]}")
    return cell


def _box_up(family: str, channels: int, ctl: str, rehearsal: Rehearsal) -> Box:
    """The emulated box of `family` forwarding to the cell (`cellab atten emulate --cell-ctl`); `virtual`:
    the cell's own control socket, no box."""
    box = box_for(family, channels)
    if box.transport == "zmq":
        box.address = ctl
        return box
    where = (["--pty-link", str(rehearsal.folder / "atten.pty")] if box.transport == "serial"
             else ["--port", "0"])
    argv = [*CLI, "atten", "emulate", box.emulator, "--transport", box.transport, *where,
            "--channels", str(channels), "--cell-ctl", ctl]
    proc = _spawn(rehearsal, "atten-emulator", argv)
    ready = json.loads(procs.wait_line(proc, '"ready"', START_TIMEOUT_S))
    box.address = str(rehearsal.folder / "atten.pty") if box.transport == "serial" else str(ready["address"])
    return box


def _phones_up(layout: Layout, cell: dict, rehearsal: Rehearsal) -> list[str]:
    """The fake adb server with one virtual phone per UE namespace of the phones, prepared as a lab's phones
    are by hand (docs/real-lab.md): Wi-Fi off, mobile data on, awake."""
    serials = [f"vphone-{layout.name}-{i + 1}" for i in range(layout.phones)]
    port = procs.free_ports(1)
    argv = [*CLI, "ue", "android", "fake-adb", "--port", str(port), "--cell-ctl", cell["ctl"],
            "--storage", str(rehearsal.folder / "phones")]
    for serial, netns in zip(serials, cell["ues"], strict=False):
        argv += ["--phone", f"{serial}={PHONE_MODEL}", "--netns", netns]
    procs.wait_port(_spawn(rehearsal, "fake-adb", argv), port, START_TIMEOUT_S)
    layout.adb_port = rehearsal.adb_port = port
    for serial in serials:
        for command in PREPARE:
            done = subprocess.run(["adb", "-P", str(port), "-s", serial, "shell", *command], capture_output=True,
                                  text=True, timeout=30)
            if done.returncode != 0:
                raise CellabError(f"adb -P {port} -s {serial} shell {' '.join(command)}: "
                                  f"{(done.stderr or done.stdout).strip()}")
    return serials


def _agents_up(layout: Layout, cell: dict, serials: list[str], rehearsal: Rehearsal,
               radio: dict | None) -> list[procs.Started]:
    keys = rehearsal.folder / "keys"
    from cellab.bus.keys import generate_keypair

    for name in ["controller", *layout.agent_names()]:
        generate_keypair(keys, name, overwrite=True)
    common = ["--controller", layout.bus, "--telemetry", layout.telemetry,
              "--controller-key", str(keys / "controller.key")]
    specs: dict[str, list[str]] = {layout.server_agent: ["--role", "server", "--netns", cell["server"][0]],
                                   layout.atten_agent: ["--role", "attenuator"]}
    for i, serial in enumerate(serials):
        specs[layout.phone_agent(i)] = ["--role", "ue", "--kind", "android", "--serial", serial,
                                        "--adb-port", str(layout.adb_port)]
    for j in range(layout.virtual_ues if radio is None else 0):
        index = layout.phones + j  # the cell's UE index, and the box's channel - 1
        specs[layout.vue_agent(j)] = ["--role", "ue", "--netns", cell["ues"][index], "--cell-ctl", cell["ctl"],
                                      "--cell-ue", str(index)]
    if radio is not None:
        specs |= rehearse_zmq.agent_args(radio, [layout.vue_agent(j) for j in range(layout.virtual_ues)],
                                         layout.enb_agent, layout.core_agent)
    started = []
    for name, args in specs.items():
        argv = [*CLI, "agent", *args, "--name", name, "--key", str(keys / f"{name}.key_secret"), *common,
                "--artifact-dir", str(rehearsal.folder / "artifacts" / name)]
        started.append(_spawn(rehearsal, name, argv))
    return started


def _spawn(rehearsal: Rehearsal, name: str, argv: list[str]) -> procs.Started:
    proc = procs.spawn(name, argv, rehearsal.folder / "logs" / f"{name}.log")
    rehearsal.processes.append(proc)
    rehearsal.save()  # recorded before the next one starts: a failed `up` leaves nothing `down` cannot find
    return proc


def down(name: str, root: Path = REHEARSE_ROOT, say: Callable[[str], None] = print) -> list[str]:
    """Stop a rehearsal's processes (agents first: they take the box to its safe state), then its cell and
    namespaces; what is left afterwards is an error naming it. Returns what was stopped."""
    folder = folder_of(name, root)
    if not (folder / STATE).exists():
        raise CellabError(f"no rehearsal {name!r} is up (no {folder / STATE}; `cellab rehearse list`)")
    rehearsal = Rehearsal.load(folder)
    agents = [p for p in rehearsal.processes if p.name not in DEVICES]
    stopped = procs.stop(agents) + procs.stop([p for p in rehearsal.processes if p not in agents])
    if rehearsal.prefix and rehearsal.radio == "virtual":  # srsran-zmq's: its stack removed them on SIGTERM
        done = subprocess.run([*CLI, "vlab", "down", "--prefix", rehearsal.prefix], capture_output=True,
                              text=True, timeout=120)
        if done.returncode != 0:
            raise CellabError(f"cellab vlab down --prefix {rehearsal.prefix}: {done.stderr.strip()[-600:]}")
        stopped.append(f"cell {rehearsal.prefix}")
    elif rehearsal.prefix:
        stopped.append(f"srsran-zmq {rehearsal.prefix} (srsRAN host lock released)")
    left = [p.name for p in rehearsal.processes if procs.group(p)]
    left += instances.namespaces_of(rehearsal.prefix) if rehearsal.prefix else []
    if left:
        raise CellabError(f"rehearsal {name}: still there after down: {', '.join(left)}")
    (folder / STATE).unlink()
    say(f"rehearsal {name}: down ({', '.join(stopped) or 'nothing was running'}); its folder {folder} keeps "
        "the inventory, keys and logs")
    return stopped


def restart(name: str, process: str, root: Path = REHEARSE_ROOT) -> procs.Started:
    """Start one of a rehearsal's processes again with its recorded command (an agent killed on purpose, as a
    lab host's service manager would); one still running is refused, naming it."""
    folder = folder_of(name, root)
    if not (folder / STATE).exists():
        raise CellabError(f"no rehearsal {name!r} is up (no {folder / STATE}; `cellab rehearse list`)")
    rehearsal = Rehearsal.load(folder)
    names = [p.name for p in rehearsal.processes]
    if process not in names:
        raise InputError(folder / STATE, "processes", f"rehearsal {name} has no process {process!r}", names)
    index = names.index(process)
    old = rehearsal.processes[index]
    if procs.group(old):
        raise CellabError(f"{process} of rehearsal {name} is running (pid {old.pid}): stop it first")
    log = Path(old.log)
    offset = log.stat().st_size if log.exists() else 0
    rehearsal.processes[index] = started = procs.spawn(process, old.argv, log, append=True)
    rehearsal.save()
    if process not in DEVICES:  # an agent: up once it said its start line again
        procs.wait_line(started, f"agent {process}:", START_TIMEOUT_S, offset)
    return started


def list_rehearsals(root: Path = REHEARSE_ROOT) -> list[Rehearsal]:
    root = Path(root)
    if not root.is_dir():
        return []
    return [Rehearsal.load(f) for f in sorted(root.iterdir()) if (f / STATE).is_file() and not f.is_symlink()]
