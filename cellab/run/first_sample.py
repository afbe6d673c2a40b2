"""A run's first sample comes after its attenuation (issue 40): once the run's values are set (the between-runs
choice applied: hold, a level, the safe state), the controller reads each channel back through the attenuator
agent until it shows the value set, then asks each UE agent for signal samples until one was taken after that
confirmation (the sample's time on the agent's clock, brought to the controller's through the run's measured
clock offset). Only then does the run's telemetry begin. The wait is bounded (FRESH_WAIT_ENV): when it runs
out the run goes on, flagged `stale-telemetry` with what was missing (cellab.results.flags), and says so."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cellab.bus import AgentTimeout, OperationError
from cellab.contracts.attenuator import AttenuatorClient
from cellab.contracts.ue import NO_RADIO_FIELD, UEClient
from cellab.envvars import env_seconds

FRESH_WAIT_ENV, FRESH_WAIT_S = "CELLAB_FRESH_SAMPLE_WAIT_S", 20.0  # a phone re-reports its signal in seconds
POLL_S = 0.2


@dataclass
class StartCheck:
    """What a run's start waited for: each channel's value read back, each UE's first fresh sample."""

    confirmed_db: dict[int, float] = field(default_factory=dict)  # channel -> the value read back
    confirmed_at_s: float | None = None  # controller clock: the last channel confirmed
    fresh: dict[str, dict[str, Any]] = field(default_factory=dict)  # UE -> its first sample after the confirmation
    no_radio: list[str] = field(default_factory=list)  # UEs with no signal to read (srsue, a UE off a cell)
    stale: list[str] = field(default_factory=list)  # what the bounded wait ran out on, in words
    waited_s: float = 0.0

    def as_metrics(self) -> dict[str, Any]:
        return {"confirmed_db": {str(c): v for c, v in self.confirmed_db.items()}, "waited_s": round(self.waited_s, 3),
                "fresh": self.fresh, "no_radio": self.no_radio, "stale": self.stale}


def confirm_start(attenuator: AttenuatorClient, box: str, applied_db: dict[int, float], step_db: float,
                  ues: dict[str, UEClient], offsets_s: dict[str, float], wait_s: float | None = None,
                  sleep: Callable[[float], None] = time.sleep) -> StartCheck:
    """Wait (at most `wait_s`, default FRESH_WAIT_ENV) until every channel of `applied_db` reads back its value and
    every UE of `ues` (name -> its agent's client; `offsets_s` by agent: agent clock minus controller clock) has a
    signal sample taken after that. Nothing is raised for a wait that runs out: the check says what was missing."""
    wait_s = env_seconds(FRESH_WAIT_ENV, FRESH_WAIT_S) if wait_s is None else wait_s
    started = time.monotonic()
    deadline = started + wait_s
    check = StartCheck()
    for channel, want_db in sorted(applied_db.items()):
        read_db = _read_back(attenuator, box, channel, want_db, step_db, deadline, sleep)
        if read_db is None:
            check.stale.append(f"attenuator {box} channel {channel}: not read back at {want_db:g} dB within "
                               f"{wait_s:g} s")
        else:
            check.confirmed_db[channel] = read_db
    check.confirmed_at_s = time.time()  # every reply above came before this moment
    if not check.stale:
        for name, client in ues.items():
            _fresh_sample(check, name, client, offsets_s.get(client.agent, 0.0), deadline, wait_s, sleep)
    check.waited_s = time.monotonic() - started
    return check


def _read_back(attenuator: AttenuatorClient, box: str, channel: int, want_db: float, step_db: float,
               deadline: float, sleep: Callable[[float], None]) -> float | None:
    """The channel's value once the device reads back `want_db` (within half a step); None by the deadline."""
    while True:
        try:
            read_db = attenuator.get(box, channel).applied_db
            if abs(read_db - want_db) <= step_db / 2 + 1e-9:
                return read_db
        except (OperationError, AgentTimeout):
            pass  # a device busy for a moment: read again until the deadline
        if time.monotonic() >= deadline:
            return None
        sleep(POLL_S)


def _fresh_sample(check: StartCheck, name: str, client: UEClient, offset_s: float, deadline: float, wait_s: float,
                  sleep: Callable[[float], None]) -> None:
    """The UE's first signal sample taken (agent clock minus its offset) after the confirmation, into `check`."""
    assert check.confirmed_at_s is not None
    last = "no sample"
    while True:
        try:
            reading = client.signal()
        except OperationError as exc:
            if exc.field == NO_RADIO_FIELD:
                check.no_radio.append(name)
                return
            last = f"its last answer: {exc.detail}"  # a phone still attaching: no serving cell yet
        except AgentTimeout as exc:
            last = str(exc)
        else:
            if reading.t_s is None:
                check.stale.append(f"UE {name}: its agent gives no sample time (an older agent): freshness unknown")
                return
            taken_s = reading.t_s - offset_s
            if taken_s >= check.confirmed_at_s:
                check.fresh[name] = {"rsrp_dbm": reading.rsrp_dbm, "cqi": reading.cqi,
                                     "after_confirmed_s": round(taken_s - check.confirmed_at_s, 3)}
                return
            last = f"its last sample was taken {check.confirmed_at_s - taken_s:.2f} s before the confirmation"
        if time.monotonic() >= deadline:
            check.stale.append(f"UE {name}: no signal sample after the attenuation was confirmed within {wait_s:g} s "
                               f"({last})")
            return
        sleep(POLL_S)


def run_start(session: Any, ues: list[Any], applied_db: dict[int, float], offsets_s: dict[str, float],
              request_s: float, log: Callable[[str], None]) -> StartCheck | None:
    """The run's start check on a session (None when nothing was set: no attenuator, no value), said when the
    wait ran out."""
    if session.attenuator is None or not applied_db:
        return None
    ctl = session.controller
    check = confirm_start(AttenuatorClient(ctl, session.roles["attenuator"], request_s), session.attenuator.name,
                          applied_db, session.attenuator.config.step_db,
                          {ue.name: UEClient(ctl, ue.agent, request_s) for ue in ues}, offsets_s)
    if check.stale:
        log("the run starts without a fresh first sample (flagged stale-telemetry): " + "; ".join(check.stale))
    return check
