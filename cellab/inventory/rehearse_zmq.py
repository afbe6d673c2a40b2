"""`cellab rehearse up NAME --radio srsran-zmq`: the rehearsal's radio is the real srsRAN 4G stack over ZMQ on this
host. The RAN room's `cellab ran zmq-stack` (a detached process of the rehearsal, reached through its command line
only) holds the srsRAN host lock and the namespaces for the rehearsal's whole life and starts srsue (with the ZMQ
broker) for each srsenb that starts; srsenb and the EPC are the inventory's own eNB and core agents', started by a
campaign as on a hardware lab. The attenuator box is emulated against the broker's per-UE gain (the stack's
attenuation control socket, which speaks the virtual cell's protocol)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

from cellab.errors import InputError
from cellab.inventory import rehearse_procs as procs
from cellab.paths import PROJECT_ROOT

MAX_UES = 4  # the srsran-zmq lab's (ran-config/zmqlab.py MAX_UES)
BIN_ENV = "CELLAB_SRSRAN_BIN"
BUNDLE_BIN = PROJECT_ROOT.parent / "shared" / "tools" / "srsran" / "bin"
PROGRAMS = ("srsenb", "srsue", "srsepc")
#: the stack's start: it may wait for another srsRAN stack's host lock (CELLAB_SRSRAN_LOCK_TIMEOUT_S, 600 s)
STACK_START_TIMEOUT_S = 720.0
WHERE = "cellab rehearse up"


def srsran_bundle() -> Path:
    """The srsRAN 4G bin folder the rehearsal runs: $CELLAB_SRSRAN_BIN, else the shared bundle; refused, naming
    the folder and what it lacks, when srsenb, srsue or srsepc is missing."""
    folder = Path(os.environ.get(BIN_ENV) or BUNDLE_BIN)
    missing = [p for p in PROGRAMS if not (folder / p).is_file()]
    if missing:
        raise InputError(WHERE, "--radio", f"srsran-zmq runs srsRAN 4G from {folder}, which has no "
                         f"{', '.join(missing)} (the bundle ../shared/tools/srsran, or set {BIN_ENV})",
                         ["virtual", f"srsran-zmq with srsenb, srsue and srsepc in {folder}"])
    return folder


def check(phones: int, virtual_ues: int, atten_family: str) -> None:
    """What srsran-zmq rehearses: srsue as virtual UEs (no phones: they live on the virtual cell), 1..MAX_UES, a
    box emulated in front of the broker; the bundle there; root (namespaces, TUN devices)."""
    if phones:
        raise InputError(WHERE, "--phones", f"{phones}: the virtual phones live on the virtual cell, not on "
                         "srsran-zmq (its UEs are srsue: --virtual-ues)", ["0 with --radio srsran-zmq"])
    if not 1 <= virtual_ues <= MAX_UES:
        raise InputError(WHERE, "--virtual-ues", f"{virtual_ues} srsue", [f"1..{MAX_UES} with --radio srsran-zmq"])
    if atten_family == "virtual":
        raise InputError(WHERE, "--atten-family", "virtual is the virtual cell's own socket; srsran-zmq's "
                         "attenuation is the ZMQ broker's, behind an emulated box", ["minicircuits", "jfw", "adaura"])
    srsran_bundle()
    if os.geteuid() != 0:
        raise InputError(WHERE, "--radio", "srsran-zmq needs root (network namespaces, srsue's TUN devices)",
                         ["virtual"])


def stack_up(ues: int, folder: Path, spawn: Callable[[str, list[str]], procs.Started], cli: list[str],
             say: Callable[[str], None]) -> dict:
    """`cellab ran zmq-stack` started detached; its ready line: prefix, namespaces, server address, attenuation
    control endpoint, the eNB profile and subscribers it wrote, the core profile."""
    argv = [*cli, "ran", "zmq-stack", "--folder", str(folder / "stack"), "--ues", str(ues),
            "--srsran-bin", str(srsran_bundle())]
    proc = spawn("zmq-stack", argv)
    say(f"radio: cellab ran zmq-stack started; it waits for the srsRAN host lock while another srsRAN stack holds "
        f"it (log {proc.log})")
    return json.loads(procs.wait_line(proc, '"ready"', STACK_START_TIMEOUT_S))


def agent_args(radio: dict, ue_agents: list[str], enb_agent: str, core_agent: str) -> dict[str, list[str]]:
    """The eNB and core agents in the stack's core namespace (they start srsenb and the EPC there), each UE's
    agent in its srsue's namespace."""
    bin_args = ["--srsran-bin", radio["srsran_bin"]]
    args = {enb_agent: ["--role", "enb", "--netns", radio["core_ns"], *bin_args],
            core_agent: ["--role", "core", "--kind", "epc", "--netns", radio["core_ns"], *bin_args]}
    for i, (name, ns) in enumerate(zip(ue_agents, radio["ue_ns"], strict=True)):
        # --cell-ctl: the stack's control socket says whether srsue i is attached (the agent's heartbeats) and its RSRP
        args[name] = ["--role", "ue", "--netns", ns, "--cell-ctl", radio["attenuation_ctl"], "--cell-ue", str(i)]
    return args


def devices(radio: dict, enb_agent: str, core_agent: str) -> dict:
    """The inventory's eNB and core: the stack's eNB profile (the ZMQ stream at the cell's own rate) and srsEPC with
    a subscriber row per srsue."""
    return {"enb": [{"name": "srsenb", "kind": "srsran", "rf": "zmq", "agent": enb_agent,
                     "profile": radio["enb_profile"]}],
            "core": [{"name": "srsepc", "flavour": "srsepc", "agent": core_agent, "profile": radio["core_profile"],
                      "subscribers": radio["subscribers"]}]}
