"""Faults inside a run (issue 28): a campaign's `faults` section names fault plans, the run parameter `faults`
picks one per run (so `faults` can be a factor: none and each plan in one matrix), and the run injects each
fault at its time into the workload, for its duration, through whoever owns the box:

| kind | box | how |
|---|---|---|
| `radio_outage` | the UE's attenuator channel | the attenuator agent sets the channel to the attenuator's maximum (or `db`: a deep fade), then back |
| `s1_cut` | the S1 path (eNB ↔ core) | the lab's typed `inject_fault` (virtual: the cell's `set_s1` op) |
| `sgi_cut` | the SGi path (core ↔ server) | the lab's `inject_fault` (virtual: the cell's `set_sgi` op) |
| `core_daemon` | the core (`daemon`: an EPC daemon, or srsepc) | the lab's `inject_fault` (killed, restarted at the end) |
| `enb_restart` | the eNB | the lab's `inject_fault` (virtual: the cell's `set_enb`; srsran-zmq: srsenb killed, restarted at the end) |
| `ue_pause` | the UE's host | the lab's `inject_fault` (virtual: its processes frozen by the cgroup v2 freezer and its packets dropped, for as long as the workload: its agent runs on and says its UE is paused) |

Each lab kind says which it can inject (`EmbeddedLab.fault_kinds`; a lab inventory: those it has a device for,
cellab.inventory.faults, each through the agent the inventory names); validation refuses the others, naming the
lab and the fault (an inventory: the device it lacks). Recovery is measured on the run's timeline from the lab's own events (the virtual cell's
RRC events and its TTI log), not from the plan: `recovery_metrics`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cellab.errors import InputError
from cellab.records import Strict

FAULT_KINDS = ("radio_outage", "s1_cut", "sgi_cut", "core_daemon", "enb_restart", "ue_pause")
# faults of one UE (its `ue`); the others (the eNB, the S1 or SGi path, a core daemon) hit every UE of the cell
UE_FAULT_KINDS = ("radio_outage", "ue_pause")
# what recovery_metrics measures for the UE of a row (the rest is the fault's own: its window and source)
PER_UE_FIGURES = ("rlf_s", "out_of_sync_s", "reattach_s", "reattach_by", "reattach_after_end_s", "pre_fault_bps",
                  "throughput_back_s", "recovery_s", "disruption_s", "lost_bytes", "longest_stall_s",
                  "user_plane_restored_s", "traffic_back_s", "reattach_stack_s", "traffic_back_stack_s",
                  "searched_until_s", "cut_by_fault", "ue_mapped_by")
# the EPC's daemons by the core agent's names (Open5GS: sgwc, sgwu, smf, pcrf too; NextEPC: sgw), and srsepc whole
CORE_DAEMONS = ("mme", "sgw", "sgwc", "sgwu", "smf", "upf", "hss", "pcrf", "srsepc")
NO_FAULT = "none"
#: a UE out for minutes (ue_pause, a radio outage) is no agent lost: the UE's agent keeps its heartbeats and says
#: its UE's state in them (cellab.bus Agent.set_ue_state); only an agent silent for PEER_LOST_S is lost (issue 41)


class FaultSpec(Strict):
    """One fault of a plan: at `at_s` into the workload, for `duration_s`."""

    kind: Literal[FAULT_KINDS] = Field(  # type: ignore[valid-type]
        description="what fails; on a lab inventory each through the agent of its device (radio_outage: the "
                    "attenuator agent; enb_restart: the eNB agent; core_daemon: the core agent; ue_pause: the UE "
                    "agent's radio off, a phone's airplane mode), refused at validate naming the device it lacks")
    at_s: float = Field(ge=0, allow_inf_nan=False, description="start, seconds into the workload")
    duration_s: float = Field(gt=0, allow_inf_nan=False, description="how long the fault lasts (s): minutes are "
                              "fine, a UE out is no agent lost (its agent keeps its heartbeats and says so)")
    ue: int = Field(0, ge=0, le=15, description="radio_outage, ue_pause: the run's UE (0: its first)")
    db: float | None = Field(None, ge=0, le=200, allow_inf_nan=False,
                             description="radio_outage: the UE's attenuation during the fault (dB; default the box's "
                                         "max_db, an outage; less: a deep fade), within the box's min_db..max_db")
    daemon: Literal[CORE_DAEMONS] | None = Field(  # type: ignore[valid-type]
        None, description="core_daemon: which daemon is killed and restarted (the lab and the run's core decide which: "
                          "srsran-zmq takes srsepc with core srsepc; hss, pcrf, sgwc, sgwu, upf, smf, mme with core "
                          "open5gs)")

    @model_validator(mode="after")
    def _daemon_only_for_core(self) -> FaultSpec:
        if self.kind == "core_daemon" and self.daemon is None:
            raise ValueError("daemon: a core_daemon fault names its daemon (" + ", ".join(CORE_DAEMONS) + ")")
        if self.kind != "core_daemon" and self.daemon is not None:
            raise ValueError(f"daemon: only a core_daemon fault names one, not {self.kind}")
        if self.kind != "radio_outage" and self.db is not None:
            raise ValueError(f"db: only a radio_outage (or fade) sets an attenuation, not {self.kind}")
        return self

    @property
    def end_s(self) -> float:
        return self.at_s + self.duration_s

    def box(self) -> str:
        """What the fault acts on: two faults on one box may not overlap."""
        if self.kind in ("radio_outage", "ue_pause"):
            return f"{self.kind.split('_')[0]} of UE {self.ue}"
        return {"s1_cut": "S1 path", "sgi_cut": "SGi path", "core_daemon": "core", "enb_restart": "eNB"}[self.kind]


class FaultStep(BaseModel):
    """The typed operation a lab's `inject_fault` receives: start (active) or end one fault."""

    model_config = ConfigDict(extra="forbid")
    kind: Literal[FAULT_KINDS]  # type: ignore[valid-type]
    active: bool
    ue: int = Field(0, ge=0, le=15)
    daemon: Literal[CORE_DAEMONS] | None = None  # type: ignore[valid-type]


def check_fault_plans(plans: dict[str, list[FaultSpec]], used: Iterable[tuple[str, str]], duration_s: float,
                      lab: str, supported: frozenset[str] | None, source: str | Path,
                      daemons: frozenset[str] | None = None,
                      refuse: Callable[[FaultSpec], tuple[str, str] | None] | None = None) -> list[InputError]:
    """Errors of the fault plans: times within the workload, no two faults overlapping on one box, every kind
    one the lab can inject (supported None: not known before a worker takes the run), every core_daemon one of
    the lab's `daemons` (None: any), none the lab's `refuse` check refuses ((field, why): an inventory naming the
    device it lacks). `used`: (field, plan name) of every `faults` value the campaign sets."""
    errors: list[InputError] = []
    allowed = [NO_FAULT, *plans]
    if NO_FAULT in plans:
        errors.append(InputError(source, f"faults.{NO_FAULT}", f"{NO_FAULT!r} means no fault; name the plan otherwise"))
    for field, name in used:
        if name not in allowed:
            errors.append(InputError(source, field, f"unknown fault plan {name!r}", allowed))
    for name, faults in plans.items():
        if not faults:
            errors.append(InputError(source, f"faults.{name}", "empty: a plan has at least one fault (the run "
                                     f"without faults is {NO_FAULT!r})"))
        for i, fault in enumerate(faults):
            where = f"faults.{name}[{i}]"
            if fault.at_s >= duration_s:
                errors.append(InputError(source, f"{where}.at_s", f"{fault.at_s:g} s is past the workload "
                                         f"(workload.duration_s {duration_s:g})", [f"0..{duration_s:g} (exclusive)"]))
            elif fault.end_s > duration_s:
                errors.append(InputError(source, f"{where}.duration_s", f"the fault ends at {fault.end_s:g} s, past "
                                         f"the workload (workload.duration_s {duration_s:g}); its recovery could not "
                                         "be measured", [f"0..{duration_s - fault.at_s:g}"]))
            if supported is None:
                errors.append(InputError(source, f"{where}.kind", f"lab {lab}: the faults a bench can inject are not "
                                         "known before a worker takes the run; name the bench's inventory"))
            elif refuse is not None and (refused := refuse(fault)) is not None:
                errors.append(InputError(source, f"{where}.{refused[0]}", f"lab {lab} cannot inject this "
                                         f"{fault.kind}: {refused[1]}"))
            elif fault.kind not in supported:
                errors.append(InputError(source, f"{where}.kind", f"lab {lab} cannot inject {fault.kind}",
                                         sorted(supported) or ["(none: this lab injects no faults)"]))
            elif fault.kind == "core_daemon" and daemons is not None and fault.daemon not in daemons:
                errors.append(InputError(source, f"{where}.daemon", f"lab {lab} cannot kill {fault.daemon}",
                                         sorted(daemons)))
            for j, other in enumerate(faults[:i]):
                if other.box() == fault.box() and fault.at_s < other.end_s and other.at_s < fault.end_s:
                    errors.append(InputError(source, f"{where}.at_s", f"overlaps faults.{name}[{j}] on the "
                                             f"{fault.box()} ({other.at_s:g}..{other.end_s:g} s); one fault per box "
                                             "at a time"))
    return errors
