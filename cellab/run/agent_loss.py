"""What a campaign does when one of an inventory's agents is lost: it says which agent, on which host, and the
command that starts it again there, then pauses until the agent answers (the campaign's `on_agent_loss: pause`,
the default) or stops (`stop`: `cellab run --resume DIR --retry-failed` continues). The wait has no timeout: a
reminder every few minutes says it still waits; Ctrl-C ends it like any other moment of the campaign (the
devices go to their safe state).

The command is the agent's own start line as the inventory describes it: its role and name, the controller's
endpoint as that host dials it, its key files (beside the inventory's copy of its public key when its secret
key is there, as on a one-host lab; else where docs/real-lab.md keeps them), a phone's kind and serial."""

from __future__ import annotations

import ipaddress
import shlex
import socket
import time
from collections.abc import Callable
from pathlib import Path

from cellab.bus.start_options import START_OPTIONS
from cellab.errors import CellabError
from cellab.inventory.model import Inventory
from cellab.run.view import duration_text

REMINDER_S = 300.0  # how often a paused campaign says it still waits
POLL_S = 1.0
AGENT_KEY_DIR = Path("/etc/cellab/keys")  # docs/real-lab.md: an agent host's keys
SECRET_SUFFIX = "_secret"


class CampaignStopped(CellabError):
    """An agent was lost and the campaign's `on_agent_loss` is stop."""


def _wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host.strip("[]")).is_unspecified
    except ValueError:
        return host == "*"


def _split(endpoint: str) -> tuple[str, str]:
    """tcp://HOST:PORT -> (HOST, PORT)."""
    host, _, port = endpoint.removeprefix("tcp://").rpartition(":")
    return host, port


def controller_address(toward: str) -> str:
    """This host's address on the route to `toward` (an agent host's address): a UDP socket's connect picks the
    route and sends nothing. The host name when there is no such route (a name this host cannot resolve)."""
    try:
        with socket.socket(socket.AF_INET6 if ":" in toward else socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((toward, 9))
            return str(probe.getsockname()[0])
    except OSError:
        return socket.gethostname()


def _dialled(endpoint: str, host_address: str) -> str:
    """A bound endpoint as the agent's host dials it: a wildcard bind becomes this host's address toward it."""
    host, port = _split(endpoint)
    if not _wildcard(host):
        return endpoint
    address = controller_address(host_address)
    return f"tcp://{f'[{address}]' if ':' in address else address}:{port}"


def _key_files(inventory: Inventory, public_key: Path) -> tuple[Path, Path]:
    """(the agent's secret key, the controller's public key) as its host holds them."""
    secret = public_key.with_name(public_key.name + SECRET_SUFFIX)
    controller_secret = inventory.controller.secret_key
    controller_public = controller_secret.with_name(controller_secret.name.removesuffix(SECRET_SUFFIX))
    if secret.is_file() and controller_public.is_file():  # a one-host lab, or a folder every host shares
        return secret.absolute(), controller_public.absolute()
    return AGENT_KEY_DIR / secret.name, AGENT_KEY_DIR / "controller.key"


def start_command(inventory: Inventory, name: str, said: dict[str, str] | None = None) -> list[str]:
    """The `cellab agent` command line that starts agent `name` on its host: from the inventory, and the host-only
    options the agent said in its hello (`said`: cellab.bus.start_options, checked there; only printed)."""
    agent = next(a for a in inventory.agents if a.name == name)
    host = next((h for h in inventory.hosts if h.name == agent.host), None)
    address = host.address if host is not None else agent.host
    controller = _dialled(inventory.controller.bind, address)
    telemetry = _dialled(inventory.controller.telemetry_bind, address)
    key, controller_key = _key_files(inventory, agent.public_key)
    argv = ["cellab", "agent", "--role", agent.role, "--name", agent.name, "--controller", controller]
    ctl_host, ctl_port = _split(controller)
    if ctl_port.isdigit() and telemetry != f"tcp://{ctl_host}:{int(ctl_port) + 1}":  # not the agent's default
        argv += ["--telemetry", telemetry]
    argv += ["--key", str(key), "--controller-key", str(controller_key)]
    phone = next((ue for ue in inventory.devices.ues if ue.agent == name and ue.kind == "android"), None)
    options = dict(said or {})
    if phone is not None:
        options |= {"kind": "android"} | ({"serial": phone.serial} if phone.serial else {})
    for option in START_OPTIONS:  # in one order, whoever said them
        if option in options:
            argv += [f"--{option.replace('_', '-')}", options[option]]
    return argv


def loss_message(inventory: Inventory, names: list[str], action: str, folder: Path,
                 said: dict[str, dict[str, str] | None] | None = None) -> str:
    """Which agents are lost, where, and how to start each again (`said`: agent -> the start options its last hello
    said, None for an agent that said none); what the campaign does meanwhile."""
    lines = []
    for name in names:
        agent = next((a for a in inventory.agents if a.name == name), None)
        if agent is None:  # the session's own relay: it lives in this process
            lines.append(f"agent {name} is lost (it runs inside this `cellab run`)")
            continue
        host = next((h for h in inventory.hosts if h.name == agent.host), None)
        where = f"host {agent.host}" + (f" ({host.address})" if host is not None else "")
        options = (said or {}).get(name)
        lines += [f"agent {name} (role {agent.role}) on {where} is lost: start it again there with",
                  f"  {shlex.join(start_command(inventory, name, options))}",
                  "  (" + ("its host's options as its hello said them; " if options is not None else
                           "its hello said no options (an older agent): add the ones of its host it was started "
                           "with, if any: --netns, --cell-ctl/--cell-ue, --srsran-bin, --artifact-dir; ") +
                  f"an installed service: systemctl restart cellab-agent-{name})"]
    if action == "stop":
        lines.append(f"the campaign stops (on_agent_loss: stop); once it is back: cellab run --resume {folder} "
                     "--retry-failed")
    else:
        lines.append("the campaign pauses and goes on by itself once it answers (on_agent_loss: pause); Ctrl-C "
                     f"stops it, the devices in their safe state (`cellab run --resume {folder} --retry-failed` "
                     "continues later and runs the failed runs again)")
    return "\n".join(lines)


def wait_until_back(lost: Callable[[], list[str]], say: Callable[[str], None], reminder_s: float = REMINDER_S,
                    sleep: Callable[[float], None] = time.sleep,
                    clock: Callable[[], float] = time.monotonic) -> float:
    """Wait, without a timeout, until `lost()` is empty, saying so every `reminder_s`; the seconds it took."""
    started = clock()
    next_reminder = started + reminder_s
    while missing := lost():
        now = clock()
        if now >= next_reminder:
            say(f"still waiting for agent {', '.join(missing)} (paused {duration_text(now - started)}): start it with "
                "the command above; Ctrl-C stops the campaign")
            next_reminder = now + reminder_s
        sleep(POLL_S)
    waited = clock() - started
    say(f"agents back after {duration_text(waited)}: the campaign goes on")
    return waited
