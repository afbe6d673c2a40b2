"""The virtual cell's parameters: one pydantic model, validated before any namespace is touched."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from cellab.errors import CellabError, from_validation_error
from cellab.labs.clock import StackClock

MAX_UES = 16
RLC_QUEUE_MIN_BYTES = 1500
RLC_QUEUE_MAX_BYTES = 1 << 30
RLC_QUEUE_ALLOWED = f'"srsenb" or a byte size {RLC_QUEUE_MIN_BYTES}..{RLC_QUEUE_MAX_BYTES}'
UL_QUEUE_ALLOWED = f'"srsue" or a byte size {RLC_QUEUE_MIN_BYTES}..{RLC_QUEUE_MAX_BYTES}'

# srsenb's rb.conf (ran-config/templates/rb.conf.j2, as srsRAN's example): qci 7 discard_timer = -1 on RLC UM (no
# timer: pdcp_entity_lte.cc forces 1500 ms only on AM bearers), qci 9 discard_timer = 150 on RLC AM
BEARER_DISCARD_MS = {7: 0, 9: 150}


def _queue(v: Any, model_name: str, allowed: str) -> Any:
    """A queue parameter: the srsRAN model's name, or a byte size within the cell's limits."""
    if v == model_name or (isinstance(v, int) and not isinstance(v, bool)
                           and RLC_QUEUE_MIN_BYTES <= v <= RLC_QUEUE_MAX_BYTES):
        return v
    raise ValueError(f"{v!r} not allowed (allowed: {allowed})")


def _queue_arg(v: str | int, model_name: str) -> str:
    """The cell's option value for a queue parameter: the model's name, or bytes:N."""
    return model_name if v == model_name else f"bytes:{v}"


class CellParams(BaseModel):
    """Everything cellab-cell is started with (README.md, "Parameters")."""

    model_config = ConfigDict(extra="forbid")

    n_prb: Literal[6, 15, 25, 50, 75, 100] = 25
    sr_period_ms: Literal[5, 10, 20, 40, 80] = 20
    cqi_period_ms: Literal[2, 5, 10, 20, 40, 80, 160] = 40
    cqi_delay_ms: int = Field(4, ge=0, le=100)
    ul_policy: Literal["srsenb", "sr-strict"] = "srsenb"
    ul_prb: int | None = Field(None, ge=1, le=100)
    ul_mcs: int = Field(20, ge=0, le=28)
    bsr_timer_ms: int = Field(20, ge=5, le=2560)
    harq_max_tx: int = Field(4, ge=1, le=8)
    # per-UE downlink queue: srsenb's (SDU limit + PDCP discard) or a byte limit with tail drop (deep buffers)
    rlc_queue: Literal["srsenb"] | int = "srsenb"
    rlc_queue_sdus: int = Field(256, ge=1, le=65536)  # srsenb: RLC_TX_QUEUE_LEN
    # the default bearer's QCI as the core provisions it, which picks srsenb's rb.conf bearer: 7 (the srsran-zmq
    # lab's and srsRAN's example subscribers) is RLC UM without a PDCP discard timer, 9 is RLC AM with 150 ms
    bearer_qci: Literal[7, 9] = 7
    pdcp_discard_ms: int | None = Field(None, ge=0, le=10000)  # None: the bearer's; 0: no discard timer
    # per-UE uplink queue: srsue's (at most 256 packets not yet started, tail drop) or a byte limit
    ul_queue: Literal["srsue"] | int = "srsue"
    core_delay_ms: float = Field(0.0, ge=0, le=10000)
    internet_delay_ms: float = Field(0.0, ge=0, le=10000)
    core_jitter_ms: int = Field(0, ge=0, le=1000)
    n_ues: int = Field(1, ge=1, le=MAX_UES)
    attenuation_db: float | list[float] = 0.0
    seed: int = Field(1, ge=0)
    fading_db: float = Field(0.0, ge=0, le=30)
    fading_coherence_ms: float = Field(100.0, ge=1, le=100000)
    trace: Path | None = None
    trace_up: Path | None = None
    unlimited: bool = False
    # a recorded stack clock (the srsran-zmq lab's stack-clock-dl.bin, format in ran-config/README.md): TTI k runs
    # at the recorded time of the file's k-th TTI, offset to the cell's start; past its end, real time (README)
    clock_file: Path | None = Field(None, description="a recorded stack clock (stack-clock-dl.bin): the cell runs "
                                                      "TTI k at its recorded time; null: real time")
    realtime: bool = False
    # idle CPUs poll instead of halting while the cell runs (/dev/cpu_dma_latency held at 0, as real-time setups
    # do): on a VM a halted vCPU wakes when the hypervisor gets to it, and the TTI clock with it (README)
    cpus_awake: bool = Field(True, description="hold the CPUs out of idle halt while the cell runs (root; costs "
                                               "power): a VM's halted vCPUs wake late and stall the TTI clock")
    # radio link failure (rrc.c): null = on for runs with faults (cellab.faults.spec), off otherwise; the timers are
    # srsenb's SIB2 (ran-config/templates/sib.conf.j2: t310 200, n310 1, t311 10000, n311 1) and its
    # rlf_release_timer_ms (4000); reest_ms and connect_ms: the cell back in sync -> connected again
    rlf: bool | None = Field(None, description="the radio link failure model (README 'Radio link failure'); null: on "
                                               "in runs with faults, off otherwise")
    t310_ms: int = Field(200, ge=0, le=2000, description="T310 (srsenb's SIB2: 200)")
    n310: int = Field(1, ge=1, le=20, description="N310: out-of-sync frames that start T310 (srsenb's SIB2: 1)")
    n311: int = Field(1, ge=1, le=10, description="N311: in-sync frames that stop T310 (srsenb's SIB2: 1)")
    t311_ms: int = Field(10000, ge=1000, le=30000, description="T311: how long the UE looks for the cell after an "
                                                                "RLF before going idle (srsenb's SIB2: 10000)")
    rlf_release_ms: int = Field(4000, ge=0, le=600000, description="the eNB releases the UE's context this long "
                                                                   "after an RLF (srsenb's rlf_release_timer_ms)")
    reest_ms: int = Field(150, ge=0, le=10000, description="RRC re-establishment: cell back in sync -> connected")
    connect_ms: int = Field(300, ge=0, le=60000, description="a new RRC connection (after T311 or the context "
                                                              "release): cell back in sync -> connected")

    @field_validator("attenuation_db")
    @classmethod
    def _atten_range(cls, v: float | list[float]) -> float | list[float]:
        for a in v if isinstance(v, list) else [v]:
            if not 0 <= a <= 200:
                raise ValueError("attenuation must be within 0..200 dB")
        return v

    @field_validator("rlc_queue", mode="before")
    @classmethod
    def _rlc_queue(cls, v: Any) -> Any:
        return _queue(v, "srsenb", RLC_QUEUE_ALLOWED)

    @field_validator("ul_queue", mode="before")
    @classmethod
    def _ul_queue(cls, v: Any) -> Any:
        return _queue(v, "srsue", UL_QUEUE_ALLOWED)

    @field_validator("trace", "trace_up")
    @classmethod
    def _trace_exists(cls, v: Path | None) -> Path | None:
        if v is not None and not Path(v).is_file():
            raise ValueError(f"trace file {v} does not exist")
        return v

    @field_validator("clock_file")
    @classmethod
    def _clock_readable(cls, v: Path | None) -> Path | None:
        if v is None:
            return v
        try:  # its contents too (header, every record), as the cell will read it
            clock = StackClock.from_file(Path(v))
        except CellabError as exc:  # names the file and the record
            raise ValueError(str(exc)) from None
        if not clock.ttis:
            raise ValueError(f"{v}: no TTI recorded (the cell needs at least one)")
        return v

    @model_validator(mode="after")
    def _consistent(self) -> CellParams:
        if isinstance(self.attenuation_db, list) and len(self.attenuation_db) not in (1, self.n_ues):
            raise ValueError(f"attenuation_db: give one value or one per UE ({self.n_ues})")
        if self.ul_prb is not None and self.ul_prb > self.n_prb:
            raise ValueError(f"ul_prb ({self.ul_prb}) exceeds n_prb ({self.n_prb})")
        srsenb_only = [f for f in ("rlc_queue_sdus", "bearer_qci", "pdcp_discard_ms")  # set away from the default
                       if getattr(self, f) != type(self).model_fields[f].default]
        if self.rlf and (self.trace is not None or self.trace_up is not None or self.unlimited):
            raise ValueError("rlf: the radio link failure model needs the radio model (not trace, trace_up or "
                             "unlimited)")
        if self.rlc_queue != "srsenb" and srsenb_only:
            raise ValueError(f"{', '.join(srsenb_only)}: only with rlc_queue srsenb (a byte-limited queue has "
                             "no SDU limit or discard timer)")
        return self

    def discard_ms(self) -> int:
        """The PDCP discard timer the srsenb queue applies (0: none)."""
        if self.pdcp_discard_ms is not None:
            return self.pdcp_discard_ms
        return BEARER_DISCARD_MS[self.bearer_qci]

    def argv(self) -> list[str]:
        """Command-line options for cellab-cell (without the TUN/endpoint options)."""
        args = [
            "--n-prb", str(self.n_prb), "--sr-period-ms", str(self.sr_period_ms),
            "--cqi-period-ms", str(self.cqi_period_ms), "--cqi-delay-ms", str(self.cqi_delay_ms),
            "--ul-policy", self.ul_policy, "--ul-mcs", str(self.ul_mcs), "--bsr-timer-ms", str(self.bsr_timer_ms),
            "--harq-max-tx", str(self.harq_max_tx), "--rlc-queue", _queue_arg(self.rlc_queue, "srsenb"),
            "--rlc-queue-sdus", str(self.rlc_queue_sdus), "--pdcp-discard-ms", str(self.discard_ms()),
            "--ul-queue", _queue_arg(self.ul_queue, "srsue"),
            "--core-delay-ms", repr(self.core_delay_ms),
            "--internet-delay-ms", repr(self.internet_delay_ms),
            "--core-jitter-ms", str(self.core_jitter_ms), "--seed", str(self.seed),
            "--fading-db", repr(self.fading_db), "--fading-coherence-ms", repr(self.fading_coherence_ms),
        ]
        atten = self.attenuation_db if isinstance(self.attenuation_db, list) else [self.attenuation_db]
        args += ["--attenuation-db", ",".join(repr(float(a)) for a in atten)]
        if self.ul_prb is not None:
            args += ["--ul-prb", str(self.ul_prb)]
        if self.trace is not None:
            args += ["--trace", str(Path(self.trace).resolve())]
        if self.trace_up is not None:
            args += ["--trace-up", str(Path(self.trace_up).resolve())]
        if self.clock_file is not None:
            args += ["--clock", str(Path(self.clock_file).resolve())]
        if self.unlimited:
            args.append("--unlimited")
        if self.realtime:
            args.append("--realtime")
        if self.cpus_awake:
            args.append("--cpus-awake")
        if self.rlf:
            args += ["--rlf", "--t310-ms", str(self.t310_ms), "--n310", str(self.n310), "--n311", str(self.n311),
                     "--t311-ms", str(self.t311_ms), "--rlf-release-ms", str(self.rlf_release_ms),
                     "--reest-ms", str(self.reest_ms), "--connect-ms", str(self.connect_ms)]
        return args


def validate_params(values: dict[str, Any], source: str = "virtual lab parameters") -> CellParams:
    """CellParams from a dict, or InputErrors naming the source, the field and the allowed values."""
    try:
        return CellParams.model_validate(values)
    except ValidationError as exc:
        raise from_validation_error(source, exc) from None
