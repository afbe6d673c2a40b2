"""The contract every embedded lab (wired, virtual) offers the runner."""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from cellab.labs import instances
from cellab.labs.clock import StackClock
from cellab.labs.instances import InstanceLease


@dataclass(frozen=True)
class Host:
    """One emulated host: the namespace it lives in and its address toward the other side."""

    name: str
    netns: str
    address: str


@dataclass(frozen=True)
class AgentSpec:
    """An agent an embedded lab needs beyond the server and UE agents every lab gets (e.g. the eNB and core
    agents of a lab built of the real LTE stack): the session starts it like the others."""

    name: str
    role: str
    kind: str | None = None
    netns: str | None = None
    args: tuple[str, ...] = ()  # extra `cellab agent` options (typed by the agent's own CLI options)


@dataclass(frozen=True)
class Topology:
    """What `up()` built: one server host and one or more UE hosts."""

    server: Host
    ues: tuple[Host, ...]
    extra: dict[str, Any] = field(default_factory=dict)


class EmbeddedLab(abc.ABC):
    """Namespaces and links on this machine, named by the instance's prefix. `up` first takes the prefix's
    lease (`claim_instance`: failing, naming the holder, when another live instance has it), then removes
    leftovers of a crashed instance of that prefix; `down` releases the lease."""

    kind: str = ""
    prefix: str = ""
    #: the held lease of this instance (cellab.labs.instances); a session may hand one in before `up`
    lease: InstanceLease | None = None
    #: the pydantic model of the run parameters this lab acts on (rate, buffer, n_prb, SR period, ...);
    #: campaign validation checks factor names and values against it
    params_model: type[BaseModel]

    @abc.abstractmethod
    def up(self) -> Topology: ...

    @abc.abstractmethod
    def configure(self, params: dict[str, Any]) -> None:
        """Apply one run's lab parameters (e.g. rate, buffer, n_prb, SR period); restart what must restart."""

    #: how late (s) the lab's telemetry may arrive after the moment it describes: the run keeps listening this
    #: long after its workload, so each sample is filed with its own run (cellab.run.telemetry)
    telemetry_lag_s: float = 0.3
    #: the most UEs one instance can run (the session refuses a campaign that asks for more)
    max_ues: int = 1
    #: the UEs sit behind the virtual cell's attenuator (a Mini-Circuits serial emulator bridged to the cell,
    #: one channel per UE; the session starts it and an attenuator agent driving it)
    cell_attenuator: bool = False
    #: the span of that attenuator (dB): the Mini-Circuits serial emulator's on topology.extra["attenuation_ctl"]
    #: (else the virtual cell's control socket, "ctl")
    attenuator_max_db: float = 95.0
    #: the faults this lab can inject inside a run (cellab.faults.spec.FAULT_KINDS): `cellab validate` refuses the others,
    #: naming the lab and the fault. `radio_outage` goes through the attenuator agent (cell_attenuator); the
    #: others through `inject_fault`
    fault_kinds: frozenset[str] = frozenset()
    #: core_daemon faults: the daemons the lab can kill and restart (None: any of cellab.faults.spec.CORE_DAEMONS)
    fault_daemons: frozenset[str] | None = None

    @classmethod
    def run_fault_daemons(cls, params: dict[str, Any]) -> tuple[str, frozenset[str]] | None:
        """core_daemon faults when what a run can kill depends on its parameters (srsran-zmq: its `core`): (the
        setting that decides, e.g. "core open5gs", the daemons a run with `params` can kill); None: the lab's
        fault_daemons hold for every run."""
        return None
    #: the downlink SNR (dB) a UE sees at attenuation_db 0, before any receiver cap: a run's SNR is this minus
    #: attenuation_db (None: the lab does not know, e.g. real RF). Lets two labs be compared at equal SNR.
    snr_at_0db_attenuation_db: float | None = None

    def claim_instance(self, purpose: str = "") -> InstanceLease:
        """This instance's lease, taken now unless already held (InstanceBusy names a live holder)."""
        if self.lease is None or not self.lease.held:
            self.lease = instances.claim(self.prefix, self.kind, purpose)
        return self.lease

    def release_instance(self) -> None:
        """After `down`: free the lease and its files (nothing of the instance is left)."""
        if self.lease is not None and self.lease.held:
            self.lease.release()
        self.lease = None
        instances.forget(self.prefix)  # only when nobody holds it (a `vlab up` cell it just stopped, say)

    def extra_agents(self) -> list[AgentSpec]:
        """Agents this lab needs beyond server and UEs, started by the session after `up()`."""
        return []

    def bind(self, controller: Any, agents: dict[str, str]) -> None:
        """Called once the session's agents answer (agents: name -> role): a lab that drives some of its boxes
        through agents (eNB, core) keeps the controller to reach them from `configure`."""
        self.controller, self.lab_agents = controller, agents

    def ground_truth(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """What the lab knows for certain about a run's radio (the SR configuration), for the manifest's
        `ground_truth`: {sr_period_ms, sr_offset_ms, sr_config_index, source}; None when it knows nothing."""
        return None

    def provenance(self) -> dict[str, Any]:
        """The lab's own software for a run's manifest, by sha256 and printed version (cellab.software): virtual,
        the cell's binary as its process runs it; srsran-zmq, srsue and the ZMQ broker; {} when it runs none."""
        return {}

    def fault(self) -> str | None:
        """What broke in the lab since the run's configure (a crashed eNB, a UE that left), if anything: when a
        run fails, the runner names it beside the error the workload saw."""
        return None

    def inject_fault(self, step: Any) -> dict[str, Any]:
        """Start or end one fault inside a run (`step`: a cellab.faults.spec.FaultStep, typed: no shell strings): the
        lab's own box (virtual: the cell's S1 path). Returns what the box replied."""
        raise NotImplementedError(f"lab {self.kind} injects no {getattr(step, 'kind', step)} fault")

    def fault_state(self) -> dict[str, Any]:
        """After a faulted run: the lab's state (virtual: each UE's RRC state, the S1 path), to tell whether it
        recovered: {"rrc_state": {ue: state}, "s1_up": bool}; {} when it does not know."""
        return {}

    def stack_tti_ms(self) -> float | None:
        """How long one TTI of the lab's radio stack lasts on the wall clock now, when the lab measures it (an
        emulated stack over ZMQ runs as fast as the host lets it, often slower than real time); None when the
        stack keeps real time or the lab does not know. The UE's SR estimator takes it as its ruler."""
        return None

    def stack_clock(self, lab_artifacts_dir: Path) -> StackClock:
        """The run's stack clock (cellab.labs.clock): when each TTI of the lab's radio stack ran, from the lab's
        artifacts of the run (the folder `collect` filled). A stack at real time (a real eNB, the virtual cell):
        the wall clock; srsran-zmq: the ZMQ broker's downlink clock. Raises CellabError (InputError for a bad
        file) when the lab has a clock but it is unusable."""
        return StackClock.wall()

    def stack_clock_excused(self) -> list[tuple[float, float, str]]:
        """Wall spans (from, to, why) of the last run in which the lab's own recovery from a fault stopped its stack
        by design while no UE had a connection to carry traffic (srsran-zmq: from an MME's kill to the UEs'
        re-attach): a stack-clock gap wholly inside one is recorded with its reason, not judged. [] by default."""
        return []

    def clock_mark(self) -> dict[str, float]:
        """The lab's own clock now, tied to the wall clock (virtual: the cell's TTI), so its logs can be put
        on the workload's timeline; {} when the lab keeps no clock of its own."""
        return {}

    def timing_faults(self) -> dict[str, Any]:
        """How far the lab's emulation fell behind real time since the run's configure (virtual: the cell's
        TTIs, its TTIs later than each counted threshold, the worst lateness, resyncs); {} when nothing in the lab keeps model time."""
        return {}

    @abc.abstractmethod
    def collect(self, run_dir: Path) -> dict[str, Path]:
        """Copy this run's lab-side artifacts (e.g. the emulator's TTI log) into run_dir; name -> path."""

    @abc.abstractmethod
    def down(self) -> None:
        """Remove everything `up` made. Safe to call twice and after a crash."""

    def __enter__(self) -> Topology:
        return self.up()

    def __exit__(self, *exc: object) -> None:
        self.down()
