"""The server role: an edge server that runs the sending end of a workload (iperf3, cellab-send), captures
its side, and loads the transport modules (BPF congestion controls and tc helpers) with their parameters.

The one list of the server modules lives here: the campaign checks `cc` against it, the runner loads
them, the server room builds and registers them."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Annotated, Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from cellab.contracts.base import Contract, Empty, Model, Op, RoleClient
from cellab.contracts.health import SelfCheckResult
from cellab.errors import InputError

ModuleName = Literal["c2tcp", "scubic", "exll", "cubic_qarr", "cubic_barr", "or_ingress", "burst_drop", "cubic_cap"]
SERVER_MODULES: tuple[str, ...] = get_args(ModuleName)
CC_MODULES: tuple[str, ...] = ("c2tcp", "scubic", "exll", "cubic_qarr", "cubic_barr", "cubic_cap")  # struct_ops tcp_congestion_ops
TC_MODULES: tuple[str, ...] = tuple(m for m in SERVER_MODULES if m not in CC_MODULES)
KERNEL_CCS: tuple[str, ...] = ("cubic", "reno", "bbr")  # built into the kernel, nothing to load
TAG_PATTERN = r"^[A-Za-z0-9_.-]{1,64}$"
RUN_ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
NETNS_PATTERN = r"^[a-z][a-z0-9-]{0,30}$"
# the server ports a run's workloads listen on: UE i of a run gets the first port + i (the lab doctor checks them free)
IPERF3_PORT = 5201
SENDER_PORT = 5301


def check_param(ranges: dict[str, Any], param: str, value: float, source: str | Path, field: str,
                steps: dict[str, float] | None = None) -> None:
    """One module parameter against the loader's ranges (ModuleInfo.param_ranges: name -> (low, high, unit))
    and steps (ModuleInfo.param_steps): a parameter of step 1 (packets, a 0/1 switch) takes whole numbers only
    (the loader stored 0.5 as 1 without a word); finer steps are the value's resolution."""
    if param not in ranges:
        raise InputError(source, field, "unknown parameter", allowed=sorted(ranges))
    low, high, unit = ranges[param]
    if isinstance(value, bool) or not isinstance(value, int | float):  # a campaign's raw value: '1', true
        raise InputError(source, field, f"{value!r} is not a number", allowed=[f"{low:g}..{high:g} {unit}"])
    if not low <= value <= high:
        raise InputError(source, field, f"{value} is out of range", allowed=[f"{low:g}..{high:g} {unit}"])
    step = (steps or {}).get(param)
    if step is not None and step >= 1 and value % step:
        raise InputError(source, field, f"{value:g} is not a whole number: the module keeps this parameter in "
                         f"steps of {step:g}", allowed=[f"{low:g}..{high:g} in steps of {step:g} ({unit})"])


class LoadModulesParams(Model):
    names: list[ModuleName] = Field(min_length=1, max_length=8)
    netns: str | None = Field(None, pattern=NETNS_PATTERN, description="tc modules: namespace of dev")
    dev: str | None = Field(None, pattern=r"^[A-Za-z0-9_.-]{1,15}$", description="tc modules: interface")


class LoadModulesResult(Model):
    loaded: list[str]
    available_cc: list[str]


class UnloadModulesParams(Model):
    names: list[ModuleName] | None = Field(None, description="None: every module this agent loaded")


class UnloadModulesResult(Model):
    unloaded: list[str]


class ModuleInfo(BaseModel):
    name: str
    kind: Literal["congestion_control", "tc_ingress", "tc_egress"]
    loaded: bool
    registered: bool
    params: dict[str, float]
    param_ranges: dict[str, tuple[float, float, str]]
    # "netns": each run (network namespace) gets its own value; "host": one value per host, so runs that
    # disagree on it must not share a host at once. Empty from an older loader: treat every one as "host".
    param_scopes: dict[str, Literal["netns", "host"]] = Field(default_factory=dict)
    # the value's resolution (1 / the loader's scale); 1: whole numbers only. Empty from an older loader
    param_steps: dict[str, float] = Field(default_factory=dict)


class ListModulesResult(Model):
    modules: list[ModuleInfo]
    available_cc: list[str]


class SetModuleParamParams(Model):
    module: ModuleName
    param: str = Field(pattern=r"^[a-z_]{1,32}$")
    value: float
    dst: str | None = Field(None, description="c2tcp target_ms only: destination prefix (CIDR)")
    netns: str | None = Field(None, pattern=NETNS_PATTERN,
                              description="the namespace whose flows get the value (default: the agent's own "
                                          "for a per-namespace parameter, else host-wide)")

    @field_validator("dst")
    @classmethod
    def _cidr(cls, v: str | None) -> str | None:
        if v is not None:
            ipaddress.ip_network(v, strict=False)  # ValueError names the bad text
        return v


class SetModuleParamResult(Model):
    module: str
    param: str
    value: float
    dst: str | None = None
    netns: str | None = Field(None, description="the namespace it was set for (None: host-wide)")


class SenderConfig(BaseModel):
    """How the sender (cellab-send) serves: what a campaign or the agent may set."""

    model_config = ConfigDict(extra="forbid")
    bind: str | None = Field(None, description="address to listen on (default: all)")
    port: int = Field(5301, ge=0, le=65535, description="0 = any free port")
    cc: str | None = Field(None, min_length=1, max_length=15, pattern=r"^[A-Za-z0-9_.-]+$",
                           description="default congestion control when a request names none")
    sample_ms: int = Field(10, ge=0, le=60000, description="TCP_INFO sample interval (0 = summaries only)")
    max_flows: int = Field(64, ge=1, le=100000)
    linger_s: int = Field(30, ge=0, le=3600, description="wait for the receiver to close after the last byte")
    netns: str | None = Field(None, pattern=NETNS_PATTERN, description="network namespace to run in")


class StartSenderParams(SenderConfig):
    run_id: str = Field("sender", pattern=RUN_ID_PATTERN, description="log folder under the artifact dir")


class StopSenderParams(Model):
    run_id: str | None = Field(None, pattern=RUN_ID_PATTERN, description="which sender; None: the only one running")


class StartSenderResult(Model):
    port: int
    log_dir: str


class StopSenderResult(Model):
    run_id: str
    files: list[str] = Field(description="log files, relative to the artifact dir")
    flows: int
    stopped: dict[str, Any]


class Iperf3ServerParams(Model):
    port: int = Field(5201, ge=1024, le=65535)
    tag: str = Field("iperf3-server", pattern=TAG_PATTERN, description="artifact name prefix")


class Iperf3ServerStarted(Model):
    port: int
    log: str


class Iperf3ServerStopParams(Model):
    port: int | None = Field(None, ge=1024, le=65535, description="which server; None: every one running")


class Iperf3ServerStopped(Model):
    returncode: int | None = Field(description="the last stopped server's exit code")


class CaptureParams(Model):
    tag: str = Field(pattern=TAG_PATTERN, description="artifact name prefix")
    interface: str = Field("any", pattern=r"^[A-Za-z0-9_.:-]{1,15}$")
    snaplen_bytes: int = Field(128, ge=64, le=65535, description="headers are enough for flow metrics")
    tcp_port: int | None = Field(None, ge=1, le=65535, description="capture only this TCP port (both directions)")
    tcp_port_last: int | None = Field(None, ge=1, le=65535, description="with tcp_port: the ports tcp_port..this")


class CaptureFile(Model):
    file: str


class ServerSelfCheckParams(Model):
    ports: list[Annotated[int, Field(ge=1, le=65535)]] = Field(
        default_factory=list, max_length=64, description="TCP ports the workloads listen on (iperf3, cellab-send)")
    modules: list[ModuleName] = Field(default_factory=list, max_length=8,
                                      description="the BPF modules the inventory says this server has")


class LinkParams(Model):
    """The server's link to the UEs cut or restored (fault `sgi_cut` on a lab inventory): nothing the server sends
    from `address` (the address the UEs reach it at) leaves it, the rest of the host's traffic untouched."""

    address: str = Field(max_length=15, description="an IPv4 address of the server's host")
    up: bool

    @field_validator("address")
    @classmethod
    def _ipv4(cls, value: str) -> str:
        return str(ipaddress.IPv4Address(value))  # ValueError names the bad text


class LinkResult(Model):
    up: bool
    device: str = Field(description="the interface that holds the address")


LOAD_MODULES = Op("load_modules", LoadModulesParams, LoadModulesResult)
UNLOAD_MODULES = Op("unload_modules", UnloadModulesParams, UnloadModulesResult)
LIST_MODULES = Op("list_modules", Empty, ListModulesResult)
SET_MODULE_PARAM = Op("set_module_param", SetModuleParamParams, SetModuleParamResult)
START_SENDER = Op("start_sender", StartSenderParams, StartSenderResult)
STOP_SENDER = Op("stop_sender", StopSenderParams, StopSenderResult)
IPERF3_SERVER_START = Op("iperf3_server_start", Iperf3ServerParams, Iperf3ServerStarted)
IPERF3_SERVER_STOP = Op("iperf3_server_stop", Iperf3ServerStopParams, Iperf3ServerStopped)
CAPTURE_START = Op("capture_start", CaptureParams, CaptureFile)
CAPTURE_STOP = Op("capture_stop", Empty, CaptureFile)
SELF_CHECK = Op("self_check", ServerSelfCheckParams, SelfCheckResult,
                "read-only: iperf3, cellab-send, tcpdump, the workload ports free, the modules, the host clock")

SET_LINK = Op("set_link", LinkParams, LinkResult, "cut (nothing sent from an address leaves) or restore the "
              "server's link to the UEs")

SERVER_CONTRACT = Contract("server", (LOAD_MODULES, UNLOAD_MODULES, LIST_MODULES, SET_MODULE_PARAM, START_SENDER,
                                      STOP_SENDER, IPERF3_SERVER_START, IPERF3_SERVER_STOP, CAPTURE_START,
                                      CAPTURE_STOP, SELF_CHECK, SET_LINK))


class ServerClient(RoleClient):
    contract = SERVER_CONTRACT

    def load_modules(self, names: list[str], timeout_s: float | None = None) -> LoadModulesResult:
        return self.call(LOAD_MODULES, LoadModulesParams(names=names), timeout_s)

    def list_modules(self, timeout_s: float | None = None) -> ListModulesResult:
        return self.call(LIST_MODULES, None, timeout_s)

    def set_module_param(self, module: str, param: str, value: float,
                         timeout_s: float | None = None) -> SetModuleParamResult:
        return self.call(SET_MODULE_PARAM, SetModuleParamParams(module=module, param=param, value=value), timeout_s)

    def start_sender(self, params: StartSenderParams, timeout_s: float | None = None) -> StartSenderResult:
        return self.call(START_SENDER, params, timeout_s)

    def stop_sender(self, run_id: str | None = None, timeout_s: float | None = None) -> StopSenderResult:
        return self.call(STOP_SENDER, StopSenderParams(run_id=run_id), timeout_s)

    def iperf3_server_start(self, params: Iperf3ServerParams, timeout_s: float | None = None) -> Iperf3ServerStarted:
        return self.call(IPERF3_SERVER_START, params, timeout_s)

    def iperf3_server_stop(self, port: int | None = None, timeout_s: float | None = None) -> Iperf3ServerStopped:
        return self.call(IPERF3_SERVER_STOP, Iperf3ServerStopParams(port=port), timeout_s)

    def capture_start(self, params: CaptureParams, timeout_s: float | None = None) -> CaptureFile:
        return self.call(CAPTURE_START, params, timeout_s)

    def capture_stop(self, timeout_s: float | None = None) -> CaptureFile:
        return self.call(CAPTURE_STOP, None, timeout_s)

    def self_check(self, params: ServerSelfCheckParams, timeout_s: float | None = None) -> SelfCheckResult:
        return self.call(SELF_CHECK, params, timeout_s)

    def set_link(self, address: str, up: bool, timeout_s: float | None = None) -> LinkResult:
        return self.call(SET_LINK, LinkParams(address=address, up=up), timeout_s)
