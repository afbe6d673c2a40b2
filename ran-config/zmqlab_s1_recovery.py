"""The srsran-zmq lab's way back from an MME restart (srsEPC whole, or Open5GS's mmed: a core_daemon fault), mixed
into the lab as S1Recovery.

What the real stack does (srsRAN 4G 23.04 through the bundles' SCTP shims, which report a lost peer as kernel SCTP
does): srsenb gets `SCTP_SHUTDOWN_EVENT`, releases its UEs and connects again, every `s1_connect_timer` (10 s of the
stack's clock) until an MME answers its S1 Setup. Its log says when (cellab.ran.s1_events, fetched from the eNB
agent's `s1_events.jsonl`): S1 is back at that line, not at a time a model assumes. The new MME does not know the
UEs: their Service Request is rejected (cause #10 from srsEPC, #9 from Open5GS) and srsue starts a fresh attach,
whose random access never reaches srsenb over ZMQ (srsRAN 4G's own tracker has it); a new srsue alone does not
attach either. So, as a real network would see its UEs come back, with a fresh attach:
1. each UE is given UE_SELF_WAIT_STACK_S of the stack's time to attach by itself (Open5GS's reject: it does);
2. a UE not back: srsenb is restarted (SIGKILL and the eNB agent's configure, as the enb_restart fault does; the
   broker and srsue keep running, the broker aligns the new srsenb's uplink to the UEs' streams): the RRC connection
   srsue kept through its PLMN search breaks, and its next attach attempt (after T3410 and T3411) goes through the
   new srsenb; the restart is a lab event (`radio_restart`, naming what was restarted and why), at most
   SRSENB_RESTARTS times, each followed by UE_ATTACH_WAIT_STACK_S; a UE still not back is named (its console's last
   lines in the recovery's record).
Each step is a lab event on the run's timeline: `s1_lost` and `s1_setup` (srsenb's log), `ue_attached` (srsue's
console: "Network attach successful", when the lab saw it), `ue_reaches_server` (a ping from the UE's namespace
through the core to the server). The recovery runs on its own thread from the fault's end (the MME started again),
so the fault's window stays the kill and the restart; fault_state waits for it."""

from __future__ import annotations

import json
import os
import subprocess
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from cellab.labs import netns
from cellab.labs.clock import CLOCK_FILES, RECORD_BYTES

from .srsue_proc import TUN_NAME

S1_BACK_TIMEOUT_S = 90.0  # wall s: srsenb's 10 s reconnect timer at 0.3 of real time, twice, and the setup
# stack s (srsRAN's timers count stack time: the run's stack clock counts them) after S1 is back for a UE's own
# attach before srsenb is restarted: after Open5GS's Service Reject (#9) srsue attached by itself 1.0 and 2.0 stack s
# after S1's return here (6.1 and 9.7 s of wall time); after srsEPC's (#10) it never did, and srsenb's restart must
# be done before srsue's next attempt (T3410 + T3411, 25 stack s after the reject)
UE_SELF_WAIT_STACK_S = 5.0
# stack s for a fresh attach after srsenb's restart: srsue's next attach attempt comes when its NAS timers T3410
# (15 s) and T3411 (10 s) have run; twice, then the UE is named not back
UE_ATTACH_WAIT_STACK_S = 40.0
SRSENB_RESTARTS = 2
MIN_SPEED = 0.2  # the slowest stack the waits scale to (slower: the host decides, not the stack)
CLOCK_CHUNK = 4096  # TTIs the broker buffers before writing its clock (broker.h)
STOP_JOIN_S = 40.0  # down()'s wait for the recovery to stop (a srsenb start in progress ends first)
POLL_S = 0.2
PING_TRIES, PING_WAIT_S = 5, 2
RECOVERY_LOG = "s1_recovery.json"
EXCUSED_AFTER_ATTACH_S = 0.5  # the attach's line reaches srsue's console just after the stack carried it
RECOVERY_JOIN_S = 900.0  # collect's and fault_state's wait for a running recovery: the sum of its steps' timeouts


def s1_events_since(text: str, since_s: float) -> list[dict[str, Any]]:
    """The eNB agent's s1_events.jsonl rows at or after `since_s` (wall s), in order; cut lines left out."""
    rows = []
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("t_s"), (int, float)) and row["t_s"] >= since_s:
            rows.append(row)
    return sorted(rows, key=lambda r: r["t_s"])


class S1Recovery:
    """The recovery thread of a SrsranZmqLab (its _ues, _enb, controller, note_event, ...)."""

    _recovery: threading.Thread | None = None
    _recovery_stop: threading.Event | None = None  # set by down(): the lab's processes are going
    _recovery_log: dict[str, Any] | None = None  # what the last recovery did and measured

    if TYPE_CHECKING:  # the lab's own
        _ues: list[Any]
        _s1_lost_at: float | None
        state_dir: Any
        controller: Any
        def note_event(self, event: dict[str, Any]) -> None: ...
        def ue_ns_of(self, index: int) -> str: ...
        def topology(self) -> Any: ...
        def _agent(self, role: str) -> str: ...
        def restart_srsenb(self, why: str) -> dict[str, Any]: ...
        def timing_faults(self) -> dict[str, Any]: ...

    def start_s1_recovery(self, daemon: str, killed_at: float) -> None:
        """From the fault's end (the MME runs again): S1 and each UE brought back on a thread (recovery_result)."""
        self.join_s1_recovery()
        before = [ue.attach_count() for ue in self._ues]
        self._recovery_log = {"daemon": daemon, "killed_at": killed_at, "done": False}
        self._recovery_stop = threading.Event()
        self._recovery = threading.Thread(target=self._recover, args=(killed_at, before), name="s1-recovery",
                                          daemon=True)
        self._recovery.start()

    def stop_s1_recovery(self) -> None:
        """The recovery ended where it stands (the lab goes down under it)."""
        if self._recovery_stop is not None:
            self._recovery_stop.set()
        self.join_s1_recovery(STOP_JOIN_S)

    def _stopping(self) -> bool:
        return self._recovery_stop is not None and self._recovery_stop.is_set()

    def join_s1_recovery(self, timeout_s: float | None = None) -> dict[str, Any] | None:
        """Wait for the running recovery (at most `timeout_s`); what it did so far."""
        if self._recovery is not None:
            self._recovery.join(timeout_s)
            if not self._recovery.is_alive():
                self._recovery = None
        return self._recovery_log

    def stack_clock_excused(self) -> list[tuple[float, float, str]]:
        """The last recovery's span, from the MME's kill to the last UE's fresh attach (srsenb released every UE at
        the kill): srsue's cell searches after the Service Reject and srsenb's restart stop the ZMQ stream for up
        to 2 s by design (srsRAN's ZMQ receive timeout) while no UE has a bearer (EmbeddedLab.stack_clock_excused).
        Without a UE back, nothing: the run is judged whole."""
        log = self._recovery_log or {}
        attached = log.get("attached_at") or {}
        if not attached or len(attached) < len(self._ues):
            return []
        return [(float(log["killed_at"]), max(attached.values()) + EXCUSED_AFTER_ATTACH_S,
                 f"{log['daemon']} restarted: no UE connected from its kill to the UEs' fresh attach (lab events "
                 "s1_lost .. ue_attached)")]

    def s1_events(self, since_s: float) -> list[dict[str, Any]]:
        """srsenb's S1 events since `since_s`, from the eNB agent (none before it logged one)."""
        local = self.state_dir / "s1_events.jsonl"
        try:
            self.controller.fetch_artifact(self._agent("enb"), local.name, local)
        except Exception:  # noqa: BLE001 - not written yet: srsenb logged no S1 event
            return []
        return s1_events_since(local.read_text(errors="replace"), since_s)

    def _recover(self, killed_at: float, attached_before: list[int]) -> None:
        log = self._recovery_log
        assert log is not None
        try:
            setup = self._wait_s1_setup(killed_at)
            log["s1_setup_at"] = setup
            self._write_recovery_log()
            if setup is None:
                log["error"] = f"srsenb set S1 up with no MME within {S1_BACK_TIMEOUT_S:g} s of the kill"
                return
            self._s1_lost_at = None
            back = self._wait_reattached(attached_before, self._after_stack_s(UE_SELF_WAIT_STACK_S))
            log["attached_by_itself"] = sorted(back)
            for attempt in range(1, SRSENB_RESTARTS + 1):
                missing = [i for i in range(len(self._ues)) if i not in back]
                if not missing or self._stopping():
                    break
                why = (f"UE {', '.join(map(str, missing))} did not attach " + (
                    f"by itself within {UE_SELF_WAIT_STACK_S:g} stack s of S1's return (srsue's attach after the "
                    "Service Reject, on its RRC connection over ZMQ)" if attempt == 1 else
                    f"within {UE_ATTACH_WAIT_STACK_S:g} stack s of srsenb's restart"))
                counts = [ue.attach_count() for ue in self._ues]
                log.setdefault("restarts", []).append({"why": why})
                self._write_recovery_log()
                log["restarts"][-1] |= self.restart_srsenb(why)
                self._write_recovery_log()
                back |= self._wait_reattached(counts, self._after_stack_s(UE_ATTACH_WAIT_STACK_S), only=missing)
            log["not_attached_console"] = {i: self._ues[i].console_text().splitlines()[-8:]
                                           for i in range(len(self._ues)) if i not in back}
            log["attached"] = sorted(back)
            log["reaches_server"] = {i: self._path_back(i) for i in sorted(back)}
        except Exception as exc:  # noqa: BLE001 - the thread's failure is the run's, reported by fault_state
            log["error"] = f"{type(exc).__name__}: {exc}"[:300]
        finally:
            log["done"] = True
            self._write_recovery_log()

    def _write_recovery_log(self) -> None:
        """What the recovery did so far, beside the lab's state (collect copies it into the run's folder)."""
        (self.state_dir / RECOVERY_LOG).write_text(json.dumps(self._recovery_log, indent=1, default=str))

    def _after_stack_s(self, stack_s: float) -> Callable[[], bool]:
        """Whether `stack_s` of the stack's own time have passed since now: the run's stack clock as the broker
        writes it (CLOCK_CHUNK TTIs at a time, so one chunk more is waited for), at most stack_s / MIN_SPEED of wall
        time (a stack that stands still: srsue's cell search stopped the stream for 9.7 s once); without the clock,
        the broker's mean speed since configure."""
        began, first = time.time(), self._stack_ttis()
        speed = self.timing_faults().get("stack_speed")
        wall_s = stack_s / max(MIN_SPEED, min(1.0, speed if isinstance(speed, (int, float)) else 1.0))
        if first is None:
            return lambda: time.time() >= began + wall_s
        return lambda: (time.time() >= began + stack_s / MIN_SPEED
                        or ((now := self._stack_ttis()) is not None and now - first >= stack_s * 1000 + CLOCK_CHUNK))

    def _stack_ttis(self) -> int | None:
        """The TTIs of the run's stack clock on disk so far (the broker's file), or None when there is none."""
        try:
            with open(self.state_dir / "broker" / "clock" / CLOCK_FILES["dl"], "rb") as clock:
                header = clock.readline(4096)
                size = os.fstat(clock.fileno()).st_size
        except OSError:
            return None
        return (size - len(header)) // RECORD_BYTES if header.endswith(b"\n") else None

    def _wait_s1_setup(self, killed_at: float) -> float | None:
        """srsenb's first S1 Setup after the kill (its log's time), noted with the loss; None at the timeout."""
        deadline, noted = killed_at + S1_BACK_TIMEOUT_S, False
        while time.time() < deadline and not self._stopping():
            events = self.s1_events(killed_at)
            if not noted and (lost := next((e for e in events if e["event"] == "s1_lost"), None)):
                self.note_event({"event": "s1_lost", "t_s": lost["t_s"], "source": "srsenb log"})
                noted = True
            setup = next((e for e in events if e["event"] == "s1_setup"), None)
            if setup is not None:
                self.note_event({"event": "s1_setup", "t_s": setup["t_s"], "source": "srsenb log"})
                return float(setup["t_s"])
            time.sleep(0.5)
        return None

    def _wait_reattached(self, before: list[int], expired: Callable[[], bool], only: list[int] | None = None) -> set[int]:
        """The UEs that printed a new attach before `expired()` (each noted when seen)."""
        pending = set(range(len(self._ues)) if only is None else only)
        back: set[int] = set()
        while True:  # a last look at the deadline
            for i in sorted(pending):
                if self._ues[i].attach_count() > before[i]:
                    self.note_event({"event": "ue_attached", "ue": i, "source": "srsue console"})
                    (self._recovery_log or {}).setdefault("attached_at", {})[i] = time.time()
                    back.add(i)
                    pending.discard(i)
            if not pending or expired() or self._stopping():
                return back
            time.sleep(POLL_S)

    def _path_back(self, index: int) -> bool:
        """The UE's default route through its (new) TUN and a ping to the server; noted when it answers."""
        ns = self.ue_ns_of(index)
        subprocess.run(netns.in_netns(ns, ["ip", "route", "replace", "default", "dev", TUN_NAME]),
                       capture_output=True, check=False)
        argv = netns.in_netns(ns, ["ping", "-c", "1", "-W", str(PING_WAIT_S), self.topology().server.address])
        for _ in range(PING_TRIES):
            if subprocess.run(argv, capture_output=True, check=False).returncode == 0:
                self.note_event({"event": "ue_reaches_server", "ue": index})
                return True
        return False
