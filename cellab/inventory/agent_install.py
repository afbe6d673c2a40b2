"""`cellab agent install`: an agent as a systemd service that survives reboots; the telemetry endpoint an agent
derives from its controller's.

The unit runs the full `cellab agent` command (telemetry included) as the user its role needs (root, or a
plain user with the groups or capabilities listed in ACCESS), restarts it when it fails, and is written only
after the key files it names were checked (a CURVE secret key readable by its owner only, the controller's
public key). `--enable` then runs `systemctl daemon-reload` and `systemctl enable --now UNIT` (argv lists, no
shell). docs/real-lab.md says what else each host needs.
"""

from __future__ import annotations

import grp
import os
import pwd
import re
import shlex
import subprocess
import sys
import textwrap
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import typer

from cellab.errors import CellabError, InputError

SOURCE = "cellab agent install"
UNIT_DIR = Path("etc/systemd/system")  # under --root
STATE_DIR = Path("/var/lib/cellab/agents")  # default artifact folder: StateDirectory=cellab/agents/NAME
DEFAULT_SERVICE_USER = "cellab"  # roles that need no root run as this user unless --user says otherwise
STOP_TIMEOUT_S = 45  # > the agent's own 30 s grace (cellab.cli.AGENT_STOP_GRACE_S): its devices go safe first
RESTART_S = 5
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# systemd expands % specifiers and $ variables and reads backslashes and quotes in ExecStart=: values with
# them are refused rather than escaped, so the command line in the unit is exactly shlex.join of the argv.
UNIT_UNSAFE = re.compile(r"[%$\\\"'\x00-\x1f\x7f]")
SERVER_CAPABILITIES = ("CAP_NET_ADMIN", "CAP_BPF", "CAP_SYS_ADMIN", "CAP_NET_RAW")


@dataclass(frozen=True)
class Access:
    """What the agent of one role.kind needs on its host."""

    default_user: str
    root_only: bool = False
    groups: tuple[str, ...] = ()
    capabilities: tuple[str, ...] = ()  # given to a user other than root (AmbientCapabilities)
    why: str = ""


ACCESS: dict[str, Access] = {
    "server.linux": Access("root", capabilities=SERVER_CAPABILITIES,
                           why="the BPF congestion-control modules (their loader, cellab-modules, runs only as "
                               "root), tc and TCP settings (CAP_NET_ADMIN), bpffs (CAP_SYS_ADMIN), BPF (CAP_BPF), "
                               "tcpdump (CAP_NET_RAW)"),
    "ue.android": Access(DEFAULT_SERVICE_USER, groups=("plugdev",),
                         why="adb over USB: the adb package's udev rules give the plugdev group the phones"),
    "ue.virtual": Access("root", why="the virtual UE runs its workload in a network namespace"),
    "attenuator.any": Access(DEFAULT_SERVICE_USER, groups=("dialout",),
                             why="serial attenuators: /dev/ttyUSB* and /dev/ttyACM* belong to dialout"),
    "enb.srsran": Access("root", root_only=True, why="srsenb and UHD set real-time thread priorities and "
                                                     "lock memory"),
    "core.epc": Access("root", root_only=True, why="the EPC daemons open tun devices and bind the S1 ports"),
}


# ------------------------------------------------------------------ telemetry
def derive_telemetry(controller: str) -> str:
    """The controller's telemetry endpoint: the same host, the controller's port + 1 (the inventory's defaults
    are 7700 and 7701)."""
    match = re.fullmatch(r"tcp://(.+):(\d+)", controller)
    if match is None or not 0 < int(match.group(2)) < 65535:
        raise InputError("cellab agent", "--telemetry", f"cannot derive the telemetry endpoint from --controller "
                         f"{controller!r} (a tcp://HOST:PORT endpoint gives tcp://HOST:PORT+1)",
                         ["--telemetry tcp://HOST:PORT", "--telemetry off"])
    return f"tcp://{match.group(1)}:{int(match.group(2)) + 1}"


def resolve_telemetry(controller: str, telemetry: str | None) -> str | None:
    """--telemetry: unset -> derived from the controller's endpoint; 'off' -> None (no telemetry); else as given."""
    if telemetry is None:
        return derive_telemetry(controller)
    if telemetry.strip().lower() == "off":
        return None
    return telemetry


TELEMETRY_OFF_WARNING = ("warning: telemetry is off (--telemetry off): this agent's samples (a phone's signal, "
                         "the eNB's per-UE metrics, attenuation applied, core events) are dropped, and runs "
                         "record none of them")


# ------------------------------------------------------------------ the agent's command line
@dataclass
class AgentCommand:
    """The arguments of one `cellab agent` (the same options, in the same spelling)."""

    role: str
    name: str
    controller: str
    key: Path
    controller_keys: list[Path]
    kind: str
    telemetry: str  # an endpoint or "off"; never unset in a unit
    netns: str | None = None
    artifact_dir: Path | None = None
    cell_ctl: str | None = None
    cell_ue: int | None = None
    serial: str | None = None
    adb_port: int | None = None
    srsran_bin: Path | None = None

    def argv(self, cellab: str) -> list[str]:
        out = [cellab, "agent", "--role", self.role, "--kind", self.kind, "--name", self.name,
               "--controller", self.controller, "--telemetry", self.telemetry, "--key", str(self.key)]
        for path in self.controller_keys:
            out += ["--controller-key", str(path)]
        optional: list[tuple[str, object]] = [
            ("--artifact-dir", self.artifact_dir), ("--netns", self.netns), ("--cell-ctl", self.cell_ctl),
            ("--cell-ue", self.cell_ue), ("--serial", self.serial), ("--adb-port", self.adb_port),
            ("--srsran-bin", self.srsran_bin)]
        for option, value in optional:
            if value is not None:
                out += [option, str(value)]
        return out


@dataclass
class Unit:
    name: str  # cellab-agent-NAME.service
    text: str
    argv: list[str]  # ExecStart, split
    user: str
    commands: list[list[str]] = field(default_factory=list)  # what --enable runs


def unit_name(agent: str) -> str:
    return f"cellab-agent-{agent}.service"


def access_for(role: str, kind: str) -> Access:
    key = f"{role}.{kind}"
    if key not in ACCESS:
        raise InputError(SOURCE, "--kind", f"no service profile for role {role!r} kind {kind!r}", sorted(ACCESS))
    return ACCESS[key]


def _unit_safe(value: str, option: str) -> str:
    if UNIT_UNSAFE.search(value):
        raise InputError(SOURCE, option, f"{value!r} has a character systemd would expand or unquote "
                         "(%, $, \\, quotes, control characters): use a path or value without it")
    return value


def render_unit(command: AgentCommand, cellab: str, user: str, env: dict[str, str] | None = None,
                state_directory: str | None = None) -> Unit:
    """The unit's text: its ExecStart is shlex.join of the agent's argv (every value checked unit-safe)."""
    access = access_for(command.role, command.kind)
    argv = command.argv(cellab)
    for i, value in enumerate(argv):
        _unit_safe(value, argv[i - 1] if i and argv[i - 1].startswith("--") else "ExecStart")
    root_user = user == "root"
    lines = [
        f"# {unit_name(command.name)}: written by `cellab agent install` (docs/real-lab.md);",
        "# run it again to change it.",
        *textwrap.wrap(f"User {user}; the {command.role} agent needs: {access.why}.", 110, initial_indent="# ",
                       subsequent_indent="# "),
        "[Unit]",
        f"Description=cellab agent {command.name} (role {command.role}, kind {command.kind})",
        "Wants=network-online.target",
        "After=network-online.target time-sync.target",
        "",
        "[Service]",
        "Type=simple",
        f"User={user}",
    ]
    if access.groups:
        lines.append(f"SupplementaryGroups={' '.join(access.groups)}")
    if access.capabilities and not root_user:
        lines += [f"AmbientCapabilities={' '.join(access.capabilities)}",
                  f"CapabilityBoundingSet={' '.join(access.capabilities)}"]
    if command.role == "server":
        lines.append("LimitMEMLOCK=infinity")  # BPF maps on kernels that still charge them to RLIMIT_MEMLOCK
    if command.role == "enb":
        lines += ["LimitRTPRIO=infinity", "LimitMEMLOCK=infinity"]
    if state_directory:
        lines.append(f"StateDirectory={state_directory}")
    lines.append("Environment=PYTHONUNBUFFERED=1")
    for key, value in sorted((env or {}).items()):
        lines.append(f'Environment="{key}={value}"')
    lines += [
        f"ExecStart={shlex.join(argv)}",
        "KillSignal=SIGTERM",
        f"TimeoutStopSec={STOP_TIMEOUT_S}",
        "Restart=on-failure",
        f"RestartSec={RESTART_S}",
        "",
        "[Install]",
        "WantedBy=multi-user.target",
        "",
    ]
    name = unit_name(command.name)
    return Unit(name, "\n".join(lines), argv, user,
                [["systemctl", "daemon-reload"], ["systemctl", "enable", "--now", name]])


# ------------------------------------------------------------------ checks
def _service_user(access: Access, role: str, kind: str, user: str | None, netns: str | None, root: Path,
                  dry_run: bool = False) -> str:
    """The user the unit runs as; one this host lacks is refused, but only warned of with --dry-run (the unit is
    printed before the user is made)."""
    try:
        return _checked_user(access, role, user, netns, root)
    except _NoAccount as exc:
        if not dry_run:
            raise InputError(SOURCE, "--user", str(exc)) from None
        typer.echo(f"warning: {exc} (before enabling this unit)", err=True)
        return user or access.default_user


class _NoAccount(Exception):
    pass


def _checked_user(access: Access, role: str, user: str | None, netns: str | None, root: Path) -> str:
    chosen = user or access.default_user
    if not NAME_RE.fullmatch(chosen) and chosen != "root":
        raise InputError(SOURCE, "--user", f"{chosen!r} is not a user name")
    if access.root_only and chosen != "root":
        raise InputError(SOURCE, "--user", f"the {role} agent runs as root ({access.why})", ["root"])
    if netns and chosen != "root":
        raise InputError(SOURCE, "--user", "--netns needs root (entering a network namespace)", ["root"])
    if root == Path("/"):
        try:
            pwd.getpwnam(chosen)
        except KeyError:
            groups = f" --groups {','.join(access.groups)}" if access.groups else ""
            raise _NoAccount(f"user {chosen!r} does not exist on this host: create it with "
                             f"`useradd --system --create-home{groups} {chosen}`, or give --user") from None
        for group in access.groups:
            try:
                grp.getgrnam(group)
            except KeyError:
                raise _NoAccount(f"group {group!r} does not exist on this host "
                                 f"({access.why}): install the package that makes it, or `groupadd {group}`") from None
    return chosen


def check_keys(key: Path, controller_keys: list[Path], user: str) -> None:
    """The secret key: a CURVE secret key file that only its owner can read (0600 or 0400), owned by the
    service's user; each controller key: a CURVE public key file (never the controller's secret)."""
    from cellab.bus.keys import SECRET_SUFFIX, check_key_file, holds_secret_key

    check_key_file(key, SOURCE, "--key", secret=True)
    try:
        account = pwd.getpwnam(user)
    except KeyError:
        account = None  # a user of another root (an image): ownership is checked when it is enabled there
    if account is not None and user != "root" and key.stat().st_uid != account.pw_uid:
        raise InputError(SOURCE, "--key", f"{key} is owned by uid {key.stat().st_uid}, not by {user}, who runs the "
                         f"agent and must read it (mode 0600): `chown {user} {key}`")
    if not controller_keys:
        raise InputError(SOURCE, "--controller-key", "give the controller's public key (controller.key)")
    for path in controller_keys:
        if path.name.endswith(SECRET_SUFFIX):
            raise InputError(SOURCE, "--controller-key", f"{path} is a secret key: give the controller's public "
                             "key (controller.key); the controller's secret never leaves its host")
        check_key_file(path, SOURCE, "--controller-key", secret=False)
        if holds_secret_key(path):  # the contents decide, not the name: a secret renamed *.key is still one
            raise InputError(SOURCE, "--controller-key", f"{path} holds a secret key (a secret-key line): give "
                             "the controller's public key file (controller.key, made by `cellab keys`); the "
                             "controller's secret never leaves its host")


def find_cellab(given: Path | None) -> str:
    """The cellab executable the unit starts: --cellab, else the one next to this Python (the venv's), else PATH."""
    import shutil

    candidates = [given] if given else [Path(sys.executable).parent / "cellab",
                                        Path(shutil.which("cellab") or "cellab")]
    for path in candidates:
        if path is not None and path.is_absolute() and path.is_file() and os.access(path, os.X_OK):
            return str(path)
    raise InputError(SOURCE, "--cellab", f"no cellab executable at {', '.join(str(c) for c in candidates)}: give "
                     "--cellab /absolute/path/to/.venv/bin/cellab")


def parse_env(values: list[str]) -> dict[str, str]:
    env = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not ENV_KEY_RE.fullmatch(key):
            raise InputError(SOURCE, "--env", f"{item!r} is not KEY=VALUE", ["CELLAB_SRSRAN_BIN=/opt/srsran/bin"])
        env[key] = _unit_safe(value, "--env")
    return env


def write_unit(unit: Unit, root: Path) -> Path:
    """The unit under root/etc/systemd/system, never through a link: each folder below --root is made or opened
    without following links, the text goes to a new file of a random name (O_CREAT|O_EXCL|O_NOFOLLOW) renamed
    over the unit's name, and a link or folder at that name is refused (cellab.safepath.SafeDir)."""
    from cellab.safepath import SafeDir

    try:
        with SafeDir.open(root, create=True) as top:
            folder = top
            opened = []
            try:
                for part in UNIT_DIR.parts:
                    folder = folder.subdir(part)
                    opened.append(folder)
                return folder.write(unit.name, unit.text, mode=0o644)
            finally:
                for each in reversed(opened):
                    each.close()
    except CellabError as exc:  # a link, a file where a folder belongs, a folder that cannot be opened
        raise InputError(SOURCE, "--root", f"{exc}; nothing written") from None
    except OSError as exc:
        raise InputError(SOURCE, "--root", f"cannot write {root / UNIT_DIR / unit.name}: {exc.strerror or exc}; "
                         "nothing written") from None


def _absolute(path: Path) -> Path:
    return Path(os.path.abspath(path))


# ------------------------------------------------------------------ the command
def install_command(
    role: Annotated[str, typer.Option(help="server | ue | attenuator | enb | core")],
    name: Annotated[str, typer.Option(help="agent name (its routing identity; the unit is cellab-agent-NAME)")],
    controller: Annotated[str, typer.Option(help="controller endpoint, e.g. tcp://10.0.0.1:7700")],
    key: Annotated[Path, typer.Option(help="this agent's CURVE secret key file (0600, owned by --user)")],
    controller_key: Annotated[list[Path], typer.Option(help="allowed controller public key file(s)")],
    kind: Annotated[str | None, typer.Option(help="the role's implementation (ue: virtual | android)")] = None,
    telemetry: Annotated[str | None, typer.Option(help="controller telemetry endpoint (default: the controller's "
                                                       "host, port + 1); off: none")] = None,
    netns: Annotated[str | None, typer.Option(help="run workloads inside this network namespace")] = None,
    artifact_dir: Annotated[Path | None, typer.Option(help="where artifacts are kept (default: "
                                                           "/var/lib/cellab/agents/NAME, made by systemd)")] = None,
    cell_ctl: Annotated[str | None, typer.Option(help="ue role, virtual lab: the cell's control endpoint")] = None,
    cell_ue: Annotated[int | None, typer.Option(min=0, help="ue role with --cell-ctl: the UE's index")] = None,
    serial: Annotated[str | None, typer.Option(help="ue role, kind android: the phone's serial")] = None,
    adb_port: Annotated[int | None, typer.Option(min=1, max=65535,
                                                 help="ue role, kind android: adb server port")] = None,
    srsran_bin: Annotated[Path | None, typer.Option(help="enb/core roles: an srsRAN bin folder")] = None,
    env: Annotated[list[str] | None, typer.Option(help="KEY=VALUE for the agent's environment (repeatable), e.g. "
                                                       "CELLAB_ATTENUATOR_CONFIG=/etc/cellab/atten.yaml")] = None,
    user: Annotated[str | None, typer.Option(help="the service's user (default per role: root for server, enb, "
                                                  f"core, virtual ue; {DEFAULT_SERVICE_USER} for android ue and "
                                                  "attenuator)")] = None,
    root: Annotated[Path, typer.Option(help="write the unit under this root (an image, a test)")] = Path("/"),
    cellab: Annotated[Path | None, typer.Option(help="the cellab executable (default: this venv's)")] = None,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="print the unit and the commands; write nothing")] = False,
    enable: Annotated[bool, typer.Option("--enable", help="then systemctl daemon-reload and enable --now the unit")
                      ] = False,
) -> None:
    """Install an agent as a systemd service: the full `cellab agent` command, the user and capabilities its role
    needs, Restart=on-failure; the key files are checked first."""
    from cellab.contracts.registry import DEFAULT_AGENT_KIND

    if role not in DEFAULT_AGENT_KIND:
        raise InputError(SOURCE, "--role", f"{role!r} is not a known role", list(DEFAULT_AGENT_KIND))
    if not NAME_RE.fullmatch(name):
        raise InputError(SOURCE, "--name", f"{name!r} is not a valid agent name",
                         ["1-64 of letters, digits, '_', '.', '-', starting with a letter or digit"])
    kind = kind or DEFAULT_AGENT_KIND[role]
    access = access_for(role, kind)
    if kind == "android" and not serial:
        raise InputError(SOURCE, "--serial", "the android UE agent needs the phone's serial (`adb devices -l`)")
    if enable and (dry_run or _absolute(root) != Path("/")):
        raise InputError(SOURCE, "--enable", "enables the unit on this host: not with --dry-run or --root")
    root = _absolute(root)
    chosen = _service_user(access, role, kind, user, netns, root, dry_run)
    if access.capabilities and chosen != "root":
        typer.echo(f"warning: {name} runs as {chosen} with {', '.join(access.capabilities)}: kernel congestion "
                   "controls, tc and the capture work; the BPF modules (c2tcp, scubic, exll, ...) do not (their "
                   "loader needs root)", err=True)
    derived = resolve_telemetry(controller, telemetry)
    key, keys = _absolute(key), [_absolute(p) for p in controller_key]
    check_keys(key, keys, chosen)
    state = None
    if artifact_dir is None:
        artifact_dir, state = STATE_DIR / name, f"cellab/agents/{name}"
    command = AgentCommand(role=role, name=name, controller=controller, key=key, controller_keys=keys, kind=kind,
                           telemetry=derived or "off", netns=netns, artifact_dir=_absolute(artifact_dir),
                           cell_ctl=cell_ctl, cell_ue=cell_ue, serial=serial, adb_port=adb_port,
                           srsran_bin=_absolute(srsran_bin) if srsran_bin else None)
    unit = render_unit(command, find_cellab(cellab), chosen, parse_env(env or []), state)
    if derived is None:
        typer.echo(TELEMETRY_OFF_WARNING, err=True)
    if dry_run:
        typer.echo(f"# would write {root / UNIT_DIR / unit.name}")
        typer.echo(unit.text, nl=False)
        for argv in unit.commands:
            typer.echo(f"# then (with --enable): {shlex.join(argv)}")
        return
    path = write_unit(unit, root)
    typer.echo(f"wrote {path} (runs as {chosen}; telemetry {derived or 'off'})")
    if not enable:
        typer.echo("enable it with: " + " && ".join(shlex.join(argv) for argv in unit.commands))
        return
    enable_unit(unit)
    typer.echo(f"enabled and started {unit.name}: `systemctl status {unit.name}`, `journalctl -u {unit.name}`")


def enable_unit(unit: Unit, run: Callable[..., subprocess.CompletedProcess] = subprocess.run) -> None:
    """systemctl daemon-reload, then enable --now: argv lists, no shell; the first failure is raised with
    systemctl's own message."""
    for argv in unit.commands:
        result = run(argv, capture_output=True, text=True, timeout=120, check=False)
        if result.returncode != 0:
            raise CellabError(f"{shlex.join(argv)} failed ({result.returncode}): "
                              f"{(result.stderr or result.stdout).strip()[-400:]}")
