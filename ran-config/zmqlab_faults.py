"""The srsran-zmq lab's own faults inside a run (issue 28; a radio outage goes through the attenuator agent,
zmqlab_attenuation), mixed into the lab as StackFaults:

| kind | box | how | `fault_state` after |
|---|---|---|---|
| `sgi_cut` | the core's link to the server | `srv0` down, then up (the kernel puts its connected route back) | `sgi_up` |
| `s1_cut` | S1-U (GTP-U) between srsenb and the core | blackhole policy rules, both directions, then removed | `s1_up`, `s1_cut_rules` |
| `core_daemon` (`daemon`: the run's core's) | srsEPC, or one Open5GS EPC daemon | SIGKILL through the core agent's `kill`, its `start` at the end | `core_daemon_restarted`, `core_down`, `user_plane_restored_s`, `s1_up`, `ue_reaches_server`, `not_back` |
| `enb_restart` | srsenb | SIGKILL (a crash), started again by the eNB agent's `configure` at the end | `enb_running`, `ue_reaches_server` |

S1 on this lab: srsenb and the EPC share the core namespace and talk over loopback. S1-U is GTP-U over UDP,
srsenb's `gtp_bind_addr` 127.0.1.1:2152 to and from the core's `gtpu_addr` 127.0.1.100:2152 (the eNB and core
profiles the lab renders from), which policy-routing rules can discard: a rule's selectors (destination,
ipproto, dport) meet a locally sent datagram at its route lookup. The rule for the `local` table sits at
preference 0 and would route loopback first, so `up` moves it behind the cut rules (LOCAL_PREF). S1-MME is
not cut: with no kernel SCTP here it runs through the srsRAN bundle's shim as AF_UNIX datagrams (abstract names
`sctpshim-127.0.1.100:36412`), which no route sees; this machine has no iptables/nft and no tc actions. A
2 s cut in a real network holds the SCTP association (its retransmissions outlast it), so what a short cut
breaks is the user plane, which is what this one cuts. Its events: `s1_down` once the first rule is in (either
direction lost stalls a TCP flow: its data or its ACKs), `s1_up` once the last is gone; each `ip` call takes
0.05-0.5 s on this busy host (the replies' `ip_s`).

A core daemon is killed by the core agent (its typed `kill`: the agent's own child, SIGKILL, reaped) and started
again by its `start` naming it (the agent starts only daemons not running). Which daemons a run may name depends on
its core (CORE_FAULT_DAEMONS; `validate` checks each run through `run_fault_daemons`): srsEPC is one process, Open5GS
has hss, pcrf, sgwc, sgwu, upf, smf, mme. A restarted srsEPC or Open5GS MME has no S1 association with srsenb; the
bundles' SCTP shims tell srsenb its MME went away (as kernel SCTP does), srsenb sets S1 up again with the new one
and the lab brings each UE back with a fresh attach, restarting what the stack needs (zmqlab_s1_recovery: srsenb's
own log says when S1 is back; the events name each step and what was restarted). On Open5GS, measured (2026-11-26,
25 PRB, one UE, a 14 s Cubic download, the daemon killed at 3 s and started again at 5 s, up 2.1 s later; the stack
at 0.76-0.91 of real time):
- hss, pcrf: nothing seen (ping silent at most 0.26 s, iperf3 10.9-16.2 Mbit/s every second); an attached UE's
  bearer needs neither.
- sgwu, upf: the user plane died with them (iperf3 0.0 from the kill on). Their control peer (SGW-C, SMF) notices
  only when its PFCP heartbeat gives up (Open5GS: 10 s after the last answer, then its retries), associates with the
  new one and restores the sessions ("PFCP restoration"): 7.8-10.7 s after the kill for sgwu (3 runs), 10.6-14.3 s
  for upf (2 runs), the ping back 0.0-0.2 s after it. At 14.3 s that was after the run's 14 s workload: its
  end-of-run ping passed, so the run passed with the data path down for the workload's last 11 s.
- sgwc, smf: the new one associates with SGW-U / UPF as a restarted peer, which deletes the old association's
  sessions ("Remote PFCP restarted", DELETION, GTP-U Error Indications to srsenb) and nothing restores them: the UE
  stays RRC-connected with a dead bearer, the run fails naming the daemon.
`fault_state` says so (`core_daemon_restarted`, `core_down`, `s1_up`, each UE's ping to the server, `not_back`
naming the daemon, `s1_recovery` after the MME's restart; after sgwu or upf `user_plane_restored_s`, from the kill to its peer's "PFCP restoration" line
in the peer's own log, fetched from the core agent: None when it has not come), `fault()` names the UEs that did
not come back and why, and the next configure restarts the stack (its restart reason names the daemon).

An eNB restart kills srsenb with SIGKILL, a crash: nothing reaches the MME or the UEs first, and the fault starts
when the process is gone (the agent's own stop, SIGTERM, lets srsenb shut its radio down for up to 5 s first). The
pid is the eNB agent's (its typed `status`), checked to be srsenb's; at the end the agent's typed `configure`
with the run's configuration starts srsenb again (it is not running) and the lab sends its cell_gain again. The
broker keeps the UEs (zmq_broker.c: silence while srsenb is gone, the new srsenb's uplink aligned); srsue finds
the new cell by itself, or not: `fault_state` pings the server from each UE, `fault()` names the UEs not back, and
the next configure restarts the stack when one is not.
"""

from __future__ import annotations

import functools
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from cellab.contracts.core import StartParams
from cellab.errors import CellabError, InputError
from cellab.labs import netns

from .zmqlab_params import CORE_PROFILES, ENB_PROFILE, default_core
from .zmqlab_s1_recovery import RECOVERY_JOIN_S, S1Recovery

GTPU_PORT = 2152
CUT_PREF = 50  # the S1 cut's rules: before the local table
LOCAL_PREF = 100  # where up() moves the local table's rule (from 0)
# core_daemon on this lab, per core: srsEPC is one process (MME, HSS, S/P-GW); Open5GS's EPC daemons by the core
# agent's names (core-config/daemons.py; its run-local FerretDB is no EPC daemon)
CORE_FAULT_DAEMONS = {"srsepc": ("srsepc",), "open5gs": ("hss", "pcrf", "sgwc", "sgwu", "upf", "smf", "mme")}
FAULT_DAEMONS = tuple(dict.fromkeys(d for names in CORE_FAULT_DAEMONS.values() for d in names))  # with any core
AGENT_DAEMON = {"srsepc": "epc"}  # the core agent's name where it differs
# restarted, these take srsenb's S1-MME and every UE's context with them: srsenb sets S1 up again with the new one,
# the UEs come back with a fresh attach (zmqlab_s1_recovery)
S1_LOST_WITH = ("srsepc", "mme")
# who re-sends a restarted user plane's sessions (PFCP), and the line it writes then (Open5GS 2.7: "11/26
# 22:56:33.178: [sgwc] ERROR: PFCP restoration (...)", the host's local time, no year)
PFCP_PEER = {"sgwu": "sgwc", "upf": "smf"}
RESTORATION = re.compile(r"^(\d\d)/(\d\d) (\d\d):(\d\d):(\d\d(?:\.\d+)?): \[\w+\] \w+: PFCP restoration\b", re.M)
KILL_WAIT_S = 3.0  # a killed srsenb's agent has reaped it (the core agent's kill waits for its own)
PATH_PING_TRIES, PATH_PING_WAIT_S = 2, 2


def local_table_argvs() -> list[list[str]]:
    """The `local` table's rule moved from preference 0 to LOCAL_PREF (added first: never without one)."""
    return [["ip", "rule", "add", "pref", str(LOCAL_PREF), "table", "local"], ["ip", "rule", "del", "pref", "0"]]


def cut_rule_argv(action: str, address: str) -> list[str]:
    """`ip rule add|del`: GTP-U datagrams to `address` discarded at their route lookup."""
    if action not in ("add", "del"):
        raise ValueError(f"action {action!r}: add or del")
    return ["ip", "rule", action, "pref", str(CUT_PREF), "to", address, "ipproto", "udp", "dport", str(GTPU_PORT),
            "blackhole"]


def s1u_addresses(enb_profile_yaml: str, core_profile_yaml: str) -> list[str]:
    """The two ends of S1-U: srsenb's GTP-U address (enb.gtp_bind_addr) and the core's (gtpu_addr)."""
    enb, core = yaml.safe_load(enb_profile_yaml), yaml.safe_load(core_profile_yaml)
    return [str(enb["enb"]["gtp_bind_addr"]), str(core["gtpu_addr"])]


@functools.cache
def lab_s1u_addresses(core_flavour: str) -> tuple[str, ...]:
    """S1-U's ends on this lab with that core (read once: a fault's start does no more than its `ip` calls)."""
    return tuple(s1u_addresses(ENB_PROFILE.read_text(), CORE_PROFILES[core_flavour].read_text()))


def restorations_in(log_text: str, year: int) -> list[float]:
    """The wall times (s since the epoch) of an Open5GS control daemon's "PFCP restoration" lines: it found its
    user-plane peer restarted and sent it the sessions it holds again."""
    times = []
    for month, day, hour, minute, sec in RESTORATION.findall(log_text):
        whole, _, frac = sec.partition(".")
        stamp = time.mktime((year, int(month), int(day), int(hour), int(minute), int(whole), 0, 0, -1))
        times.append(stamp + float(f"0.{frac or 0}"))
    return times


def cut_rules_in(rules_json: str) -> list[str]:
    """The destinations of the S1 cut's rules in `ip -j rule show` output (empty: none in place)."""
    rules = json.loads(rules_json or "[]")
    return sorted(str(r.get("dst")) for r in rules if isinstance(r, dict) and r.get("priority") == CUT_PREF
                  and r.get("action") == "blackhole")


class StackFaults(S1Recovery):
    """The srsran-zmq lab's `inject_fault` and `fault_state` (the lab's fields and helpers below)."""

    core_ns: str
    core_flavour: str | None
    _ues: list[Any]
    _s1_lost_at: float | None = None  # srsEPC or the MME killed under srsenb: S1 is gone until the next restart
    _s1_lost_by: str = "srsepc"  # which daemon's restart lost it (S1_LOST_WITH)
    _core_restarted: str | None = None  # a core daemon killed under the UEs: are they back? (until the next restart)
    _core_killed_at = 0.0  # when (wall clock)
    _enb_restarted_at: float | None = None  # srsenb killed under the UEs: are they back? (until the next restart)
    _enb_params: Any
    _enb_restarts: int

    if TYPE_CHECKING:  # the lab's own (stubs here would shadow them in its method order)
        def note_event(self, event: dict[str, Any]) -> None: ...
        def ue_ns_of(self, index: int) -> str: ...
        def topology(self) -> Any: ...
        def renew_cell_gain(self) -> None: ...
        def _core_down(self) -> str | None: ...
        def _core(self) -> Any: ...
        def _enb(self) -> Any: ...
        def _agent(self, role: str) -> str: ...
        def _fetch_joined(self, role: str, name: str, dest: Path) -> Path: ...
        controller: Any
        state_dir: Any

    def _ip(self, argv: list[str], what: str) -> str:
        done = subprocess.run(netns.in_netns(self.core_ns, argv), capture_output=True, text=True, check=False)
        if done.returncode != 0:
            raise CellabError(f"srsran-zmq lab: {what}: {done.stderr.strip()[:200]}")
        return done.stdout

    @classmethod
    def run_fault_daemons(cls, params: dict[str, Any]) -> tuple[str, frozenset[str]]:
        """What a run's core_daemon faults may kill: its core's daemons (`core`, else the lab's default)."""
        core = params.get("core") or default_core()
        setting = f"core {core}" if params.get("core") else f"core {core} (the default here: no run sets `core`)"
        return setting, frozenset(CORE_FAULT_DAEMONS[core])

    def prepare_s1_cut(self) -> None:
        """At up: the core namespace's local table behind the S1 cut's rules."""
        for argv in local_table_argvs():
            self._ip(argv, "moving the local table's rule")
        for flavour in CORE_PROFILES:
            lab_s1u_addresses(flavour)

    def inject_fault(self, step: Any) -> dict[str, Any]:
        kind = getattr(step, "kind", None)
        if kind == "sgi_cut":
            return self._sgi(up=not step.active)
        if kind == "s1_cut":
            return self._s1(cut=step.active)
        if kind == "core_daemon":
            return self._core_daemon(step.daemon, killed=step.active)
        if kind == "enb_restart":
            return self._enb_restart(killed=step.active)
        raise CellabError(f"the srsran-zmq lab injects {kind or step} faults through their owner (radio_outage: "
                          "the attenuator agent); its own: sgi_cut, s1_cut, core_daemon, enb_restart")

    def _sgi(self, up: bool) -> dict[str, Any]:
        self._ip(["ip", "link", "set", "srv0", "up" if up else "down"], f"SGi link {'up' if up else 'down'}")
        self.note_event({"event": "sgi_up" if up else "sgi_down"})
        return {"ok": True, "sgi_up": up}

    def _s1(self, cut: bool) -> dict[str, Any]:
        addresses = lab_s1u_addresses(self.core_flavour or "srsepc")
        # each `ip` call takes 0.05-0.2 s here: the start adds without listing (the player starts a fault once);
        # the end removes what is there (also after a start that failed halfway)
        present = [] if cut else self._cut_rules()
        took_s = []
        for address in addresses if cut else present:
            began = time.monotonic()
            self._ip(cut_rule_argv("add" if cut else "del", address), f"S1-U rule to {address}")
            took_s.append(round(time.monotonic() - began, 3))
            if cut and len(took_s) == 1:  # one direction lost already stalls TCP (its data or its ACKs)
                self.note_event({"event": "s1_down"})
        if not cut:  # both directions through again
            self.note_event({"event": "s1_up"})
        return {"ok": True, "s1_up": not cut, "cut_udp_2152_to": list(addresses) if cut else [], "ip_s": took_s}

    def _cut_rules(self) -> list[str]:
        return cut_rules_in(self._ip(["ip", "-j", "rule", "show"], "listing the rules"))

    def _core_daemon(self, daemon: str | None, killed: bool) -> dict[str, Any]:
        """One daemon of the run's core SIGKILLed through the core agent's typed `kill` (a crash: its peers are
        told nothing), started again at the end by the agent's `start`, which starts only what is not running."""
        allowed = CORE_FAULT_DAEMONS.get(self.core_flavour or "", ())
        if daemon not in allowed:
            raise InputError("fault", "daemon", f"{daemon!r}: this run's core is {self.core_flavour}; a core_daemon "
                             "fault on srsran-zmq kills one of its daemons", list(allowed))
        name = AGENT_DAEMON.get(daemon, daemon)
        core = self._core()
        if not killed:
            began = time.monotonic()
            status = core.start(StartParams(daemons=[name]))
            state = next((d for d in status.daemons if d.name == name), None)
            if state is None or not state.running:
                raise CellabError(f"srsran-zmq lab: {daemon} did not restart: " + "; ".join(status.problems))
            self.note_event({"event": "core_up", "daemon": daemon})
            if daemon in S1_LOST_WITH:  # srsenb sets S1 up again, the UEs attach afresh: on the recovery's thread
                self.start_s1_recovery(daemon, self._core_killed_at)
            return {"ok": True, "daemon": daemon, "pid": state.pid, "start_s": round(time.monotonic() - began, 3),
                    "core_problems": status.problems}
        killed_at = time.time()
        result = core.kill(name)
        self._core_restarted, self._core_killed_at = daemon, killed_at
        if daemon in S1_LOST_WITH:
            self._s1_lost_at, self._s1_lost_by = killed_at, daemon
        self.note_event({"event": "core_down", "daemon": daemon})
        return {"ok": True, "daemon": daemon, "killed_pid": result.pid, "exit_code": result.exit_code,
                "kill_s": result.waited_s}

    def _enb_restart(self, killed: bool) -> dict[str, Any]:
        if killed:
            pid = self._kill_srsenb()
            self._enb_restarted_at = time.time()
            self.note_event({"event": "enb_down"})
            return {"ok": True, "killed_pid": pid}
        started = self._start_srsenb()
        self._s1_lost_at = None  # the new srsenb set S1 up with whatever core runs now
        self.note_event({"event": "enb_up"})
        return started

    def _kill_srsenb(self) -> int:
        """SIGKILL to the eNB agent's srsenb (a crash: nothing reaches the MME or the UEs first), once reaped."""
        enb = self._enb()
        status = enb.status()
        pid = status.pid if status.state in ("running", "starting") else None
        if pid is None or _comm(pid) != "srsenb":  # the agent's child is srsenb itself: never kill another pid
            raise CellabError(f"srsran-zmq lab: no running srsenb to kill (eNB agent: {status.state}, pid "
                              f"{status.pid})")
        os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + KILL_WAIT_S
        while time.monotonic() < deadline and enb.status().state in ("running", "starting"):
            time.sleep(0.05)  # the agent's status reaps it
        return pid

    def _start_srsenb(self) -> dict[str, Any]:
        """srsenb started again by the eNB agent's configure with the run's configuration, at the run's cell gain."""
        if self._enb_params is None:
            raise CellabError("srsran-zmq lab: no srsenb configuration to restart with (configure did not run)")
        enb = self._enb()
        began = time.monotonic()
        result = enb.configure(self._enb_params)  # srsenb is not running: the agent starts it
        self._enb_restarts = enb.status().restarts  # this start is the lab's, not a crash of the run
        self.renew_cell_gain()  # a new srsenb starts at the profile's gain
        return {"ok": True, "pid": result.pid, "restarted": result.restarted,
                "restart_reasons": result.restart_reasons, "start_s": round(time.monotonic() - began, 3)}

    def restart_srsenb(self, why: str) -> dict[str, Any]:
        """srsenb killed and started again under running UEs to bring them back (a recovery's step, not a fault),
        noted as a `radio_restart` event naming what was restarted and why."""
        self.note_event({"event": "radio_restart", "restarted": ["srsenb"], "why": why})
        killed = self._kill_srsenb()
        return {"restarted": ["srsenb"], "why": why, "killed_pid": killed, "start": self._start_srsenb()}

    def _core_log(self, daemon: str) -> str:
        """An Open5GS daemon's own log file (beside its captured output, which lacks some lines), fetched from the
        core agent's artifacts with its older half (NAME.log.1: the agent keeps it within the lab's bound)."""
        state = next(d for d in self._core().status().daemons if d.name == daemon)
        name = str(Path(state.log).with_suffix(".log"))
        local = self._fetch_joined("core", name, self.state_dir / f"core-{daemon}.log")
        return local.read_text(errors="replace")

    def user_plane_restored_s(self) -> float | None:
        """After SGW-U's or the UPF's restart: how long after the kill its control peer (SGW-C, SMF) sent it the
        sessions again (its "PFCP restoration" line), or None (not yet, or no such peer)."""
        peer = PFCP_PEER.get(self._core_restarted or "")
        if peer is None:
            return None
        year = time.localtime(self._core_killed_at).tm_year
        after = [t for t in restorations_in(self._core_log(peer), year) if t >= self._core_killed_at - 1.0]
        return round(min(after) - self._core_killed_at, 2) if after else None

    def ues_reaching_server(self) -> dict[str, bool]:
        """Each UE's data path: a ping from its namespace answered by the server behind the SGi."""
        server = self.topology().server.address
        out = {}
        for ue in self._ues:
            argv = netns.in_netns(self.ue_ns_of(ue.index), ["ping", "-c", "1", "-W", str(PATH_PING_WAIT_S), server])
            out[str(ue.index)] = any(subprocess.run(argv, capture_output=True, check=False).returncode == 0
                                     for _ in range(PATH_PING_TRIES))
        return out

    def s1_lost_reason(self) -> str | None:
        """Why S1 needs the stack restarted (srsEPC or the MME restarted under the running srsenb, and srsenb has not
        set S1 up with the new one: its recovery's own words), or None."""
        if self._s1_lost_at is None:
            return None
        log = self._recovery_log or {}
        how = log.get("error") or ("srsenb has not set S1 up with it yet" if not log.get("done") else "")
        return (f"{self._s1_lost_by} was restarted under the running srsenb (core_daemon fault)"
                + (f": {how}" if how else ""))

    def core_restart_reason(self) -> str | None:
        """A core daemon was restarted under the UEs since the stack's last restart (a core_daemon fault), or None."""
        if self._core_restarted is None:
            return None
        return f"{self._core_restarted} was restarted under the running UEs (core_daemon fault)"

    def enb_restart_reason(self) -> str | None:
        """srsenb was restarted under the UEs since the stack's last restart (an enb_restart fault), or None."""
        if self._enb_restarted_at is None:
            return None
        return "srsenb was restarted under the running UEs (enb_restart fault)"

    def s1_restored(self) -> None:
        """The stack restarted (srsenb with the core): S1 set up afresh, the UEs attached anew."""
        self._s1_lost_at = self._enb_restarted_at = self._core_restarted = None
        self._recovery_log = None

    def enb_restart_settled(self) -> None:
        """A configure found every UE back after srsenb's or a core daemon's restart: the next runs judge their own
        faults."""
        self._enb_restarted_at = self._core_restarted = None

    def lost_ues_fault(self) -> str | None:
        """After a core daemon's or srsenb's restart under the UEs, the UEs that did not come back (no ping through
        to the server), named with the cause."""
        why = self.s1_lost_reason() or self.core_restart_reason() or self.enb_restart_reason()
        if why is None:
            return None
        lost = [f"UE {i}" for i, ok in self.ues_reaching_server().items() if not ok]
        return f"{', '.join(lost)} did not come back: no ping to the server ({why})" if lost else None

    def fault_state(self) -> dict[str, Any]:
        """Each UE's RRC state (srsue's log) and ping to the server, the SGi link, the S1 cut's rules left and
        whether S1 is up (no rule left and no srsEPC restarted under srsenb)."""
        recovery = self.join_s1_recovery(RECOVERY_JOIN_S)  # the UEs' way back after the MME's restart: done first
        show = self._ip(["ip", "-o", "link", "show", "srv0"], "SGi link state")
        flags = show.split("<", 1)[1].split(">", 1)[0].split(",") if "<" in show else []
        rules = self._cut_rules()
        state = super().fault_state() | {  # type: ignore[misc]
            "sgi_up": "UP" in flags, "s1_cut_rules": rules, "s1_up": not rules and self._s1_lost_at is None,
            "ue_reaches_server": self.ues_reaching_server()}
        if (why := self.s1_lost_reason()) is not None:
            state["s1_down_why"] = why
        if recovery is not None:
            state["s1_recovery"] = {k: v for k, v in recovery.items() if k != "killed_at"}
        if self._enb_restarted_at is not None:
            state["enb_running"] = self._enb().status().state == "running"
        after = ""
        if self._core_restarted is not None:
            state["core_daemon_restarted"] = self._core_restarted
            state["core_down"] = self._core_down()  # None: every daemon of the core runs again
            if self._core_restarted in PFCP_PEER:
                try:
                    state["user_plane_restored_s"] = self.user_plane_restored_s()
                except (CellabError, OSError, StopIteration) as exc:  # the rest of the state still stands
                    state["user_plane_restored_s"] = None
                    state["user_plane_restored_unread"] = f"{type(exc).__name__}: {exc}"[:300]
            after = f" after {self._core_restarted}'s restart"
        if why is not None or self._enb_restarted_at is not None or self._core_restarted is not None:
            state["not_back"] = [f"UE {i} did not come back{after}" for i, ok in state["ue_reaches_server"].items()
                                 if not ok]
        return state


def _comm(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm") as f:
            return f.read().strip()
    except OSError:
        return ""
