"""The ue role: a UE that runs the receiving end of a workload and reports its radio.

Implemented by the virtual UE (a namespace of the virtual lab) and the Android UE (a phone over adb);
the implementation is chosen by the UE's kind in the inventory (entry points `ue.virtual`, `ue.android`).
"""

from __future__ import annotations

import ipaddress
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from cellab.contracts.base import Contract, Empty, Model, Op, RoleClient
from cellab.contracts.health import SelfCheckResult

CC_PATTERN = r"^[a-z0-9_]{1,16}$"
TAG_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"


class ProbeFlow(Model):
    """One flow the probe asks the sender for: N bytes or T seconds, started start_ms after the first."""

    size_bytes: int | None = Field(None, ge=1, le=1 << 40)
    duration_s: float | None = Field(None, gt=0, le=3600)
    start_ms: int = Field(0, ge=0, le=3_600_000)
    cc: str | None = Field(None, pattern=CC_PATTERN, description="sender congestion control for this flow")
    tag: int = Field(0, ge=0, le=(1 << 63) - 1)

    @model_validator(mode="after")
    def _one_amount(self) -> ProbeFlow:
        if (self.size_bytes is None) == (self.duration_s is None):
            raise ValueError("give exactly one of size_bytes or duration_s")
        return self

    def spec(self) -> str:
        parts = [f"bytes={self.size_bytes}" if self.size_bytes is not None else f"seconds={self.duration_s:g}",
                 f"start_ms={self.start_ms}", f"tag={self.tag}"]
        if self.cc:
            parts.append(f"cc={self.cc}")
        return ",".join(parts)


#: one SR probe at most: a gap of up to 110 ms, the RTT, and the wait for an SR occasion (cellab-probe)
SR_PROBE_MAX_S = 0.3


def sr_probe_budget(sr_probes: int, sr_probes_max: int | None) -> int:
    """How many SR probes a fetch may send: its budget, or cellab-probe's default of twice the first ones."""
    return sr_probes_max if sr_probes_max is not None else 2 * sr_probes


class FetchRequest(Model):
    """What `cellab-probe fetch` is asked to do (typed, validated: agents never run a string from the wire)."""

    server: str = Field(description="sender's IP address")
    port: int = Field(5301, ge=1, le=65535)
    flows: list[ProbeFlow] = Field(min_length=1, max_length=32)
    control: Literal["none", "exll", "dfcsd"] = "none"
    capture: Literal["auto", "packet", "socket"] = "auto"
    interface: str | None = Field(None, pattern=r"^[A-Za-z0-9_.:-]{1,15}$")
    timeout_s: float = Field(60.0, gt=0, le=86400)
    connect_timeout_s: float = Field(5.0, gt=0, le=600)
    rcvbuf_bytes: int = Field(8 << 20, ge=64 << 10, le=1 << 30)
    packet_log: bool = Field(True, description="write the per-packet event log")
    ms_log: bool = Field(False, description="write the per-millisecond log")
    exll_alpha_pkts: float | None = Field(None, gt=0, le=100_000)
    exll_gamma: float | None = Field(None, gt=0, le=1)
    dfcsd_beta_pkts: float | None = Field(None, gt=0, le=100_000)
    sr_probes: int = Field(0, ge=0, le=256, description="idle-uplink ICMP probes before the flows (SR period)")
    sr_probes_max: int | None = Field(None, ge=1, le=256,
                                      description="more probes while the SR candidates are not told apart, up to "
                                                  "this many (the probe's default: 2 x sr_probes)")
    stack_tti_ms: float | None = Field(None, ge=0.5, le=20, allow_inf_nan=False,
                                       description="the radio stack's TTI on the wall clock, when the lab measures it "
                                                   "(an emulated stack slower than real time): the SR estimator's "
                                                   "ruler, before the download's own")

    @model_validator(mode="after")
    def _budget(self) -> FetchRequest:
        if self.sr_probes_max is not None and self.sr_probes_max < max(1, self.sr_probes):
            raise ValueError("sr_probes_max: needs sr_probes, and at least as many")
        return self

    @field_validator("server")
    @classmethod
    def _ip(cls, value: str) -> str:
        return str(ipaddress.ip_address(value))


class ProbeFetchParams(FetchRequest):
    """A fetch request plus the artifact name prefix."""

    tag: str = Field("probe", pattern=TAG_PATTERN, description="artifact name prefix")


class FetchResult(Model):
    status: Literal["ok", "partial", "error"]
    artifacts: list[str] = Field(description="artifact names, relative to the agent's artifact directory")
    summary: dict[str, Any] = Field(description="the probe's JSON summary")


class Iperf3ClientParams(Model):
    server: str = Field(description="server IPv4 address")
    port: int = Field(5201, ge=1024, le=65535)
    direction: Literal["download", "upload"] = "download"
    duration_s: float = Field(10.0, gt=0, le=3600)
    flows: int = Field(1, ge=1, le=16)
    cc: str = Field("cubic", pattern=r"^[a-z0-9_]{1,15}$", description="sender's congestion control")
    ping_interval_ms: float | None = Field(200.0, ge=10, le=10_000)
    tag: str = Field("run", pattern=TAG_PATTERN, description="artifact name prefix")

    @field_validator("server")
    @classmethod
    def _ipv4(cls, value: str) -> str:
        return str(ipaddress.IPv4Address(value))


class Iperf3ClientResult(Model):
    artifacts: list[str]
    elapsed_s: float


class SignalReading(Model):
    """What the UE's modem reports of the serving cell (a phone: its telephony signal strength)."""

    rsrp_dbm: float
    sinr_db: float | None = None
    rsrq_db: float | None = None
    cqi: int | None = None
    earfcn: int | None = None
    pci: int | None = None
    source: str
    t_s: float | None = Field(None, allow_inf_nan=False,
                              description="the agent's wall clock when it began taking this sample: a run's first "
                                          "sample counts only when taken after its attenuation was confirmed")


# the field a UE agent's `signal` failure names when its UE has no radio it can read (a virtual UE off a cell,
# srsue): a run's start has no sample of it to wait for
NO_RADIO_FIELD = "radio"


class UeStateSample(Model):
    """Telemetry `ue_state`: the agent's UE changed state (cellab.bus Agent.set_ue_state), the agent alive."""

    state: Literal["in", "out", "paused"]
    detail: str = ""


class RadioParams(Model):
    """The UE's radio on or off (fault `ue_pause` on an inventory): a phone's airplane mode through adb; a virtual
    UE's host held by its cell (what its modem receives dropped, what it sends lost)."""

    on: bool


class RadioResult(Model):
    on: bool
    how: str = Field(max_length=200, description="what the agent did, e.g. 'airplane mode enable'")


FETCH = Op("fetch", ProbeFetchParams, FetchResult, "run the receiver probe (timed or sized flows, receiver control)")
IPERF3_CLIENT = Op("iperf3_client", Iperf3ClientParams, Iperf3ClientResult, "one iperf3 transfer with a concurrent ping")
SIGNAL = Op("signal", Empty, SignalReading, "the serving cell's signal now")
SELF_CHECK = Op("self_check", Empty, SelfCheckResult,
                "read-only: the probe build (on the phone), the phone's Wi-Fi, mobile data and airplane mode, "
                "the host clock")

SET_RADIO = Op("set_radio", RadioParams, RadioResult, "the UE's radio off (out of coverage, for a fault) or on again")

UE_CONTRACT = Contract("ue", (FETCH, IPERF3_CLIENT, SIGNAL, SELF_CHECK, SET_RADIO),
                       telemetry={"signal": SignalReading, "ue_state": UeStateSample})


class UEClient(RoleClient):
    contract = UE_CONTRACT

    def fetch(self, params: ProbeFetchParams, timeout_s: float | None = None) -> FetchResult:
        return self.call(FETCH, params, timeout_s)

    def iperf3_client(self, params: Iperf3ClientParams, timeout_s: float | None = None) -> Iperf3ClientResult:
        return self.call(IPERF3_CLIENT, params, timeout_s)

    def signal(self, timeout_s: float | None = None) -> SignalReading:
        return self.call(SIGNAL, None, timeout_s)

    def self_check(self, timeout_s: float | None = None) -> SelfCheckResult:
        return self.call(SELF_CHECK, None, timeout_s)

    def set_radio(self, on: bool, timeout_s: float | None = None) -> RadioResult:
        return self.call(SET_RADIO, RadioParams(on=on), timeout_s)
