"""The enb role: an eNB (srsENB) that renders its configs from a profile, runs, and reports per-UE metrics.

Implemented by the RAN room (entry point `enb.srsran`). The controller sends the profile's YAML text and
the run's radio parameters; the agent validates both with the room's profile model, so a bad value is
refused on the lab host with the same message `cellab ran check` gives on the controller.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cellab.contracts.base import Contract, Empty, Model, Op, RoleClient
from cellab.contracts.health import SelfCheckResult

EnbState = Literal["stopped", "starting", "running", "exited", "crashed"]


class RadioOverrides(Model):
    """A run's radio parameters, applied on top of the profile (None: the profile's value)."""

    n_prb: Literal[6, 15, 25, 50, 75, 100] | None = None
    dl_earfcn: int | None = Field(None, ge=0, le=262143)
    sr_period_ms: Literal[5, 10, 20, 40, 80] | None = None
    sr_offset_ms: int | None = Field(None, ge=0, le=79)
    cqi_period_ms: Literal[2, 5, 10, 20, 40, 80, 160, 32, 64, 128] | None = None
    tx_gain_db: float | None = Field(None, ge=0, le=100)
    rx_gain_db: float | None = Field(None, ge=0, le=100)


class ConfigureParams(Model):
    profile_yaml: str = Field(min_length=1, max_length=1 << 20, description="the eNB profile's YAML text")
    profile_name: str = Field("profile", max_length=256, description="the profile's file name, for messages")
    overrides: RadioOverrides = Field(default_factory=RadioOverrides)
    ready_timeout_s: float = Field(30.0, gt=0, le=600)


class ConfigureResult(Model):
    restarted: bool = Field(description="srsenb was (re)started: UEs must attach again")
    restart_reasons: list[str] = Field(description="the parameters whose change needed the restart")
    state: EnbState
    pid: int | None
    rendered: list[str] = Field(description="artifact names of the rendered config files")


class SrGroundTruth(Model):
    """The SR configuration a UE was given: from the eNB's RRCConnectionSetup (`rrc`) or the config (`config`)."""

    sr_period_ms: int
    sr_offset_ms: int
    sr_config_index: int
    source: Literal["rrc", "config"]
    rnti: int | None = None


class UeMetrics(Model):
    """One UE's metrics in one srsENB report period (JSON report `ue_container`), units in the names."""

    t_s: float
    carrier_id: int
    pci: int
    rnti: int
    dl_cqi: float | None = None
    dl_mcs: float | None = None
    dl_bitrate_bps: float | None = None
    dl_bler: float | None = None
    ul_snr_db: float | None = None
    ul_mcs: float | None = None
    ul_bitrate_bps: float | None = None
    ul_bler: float | None = None
    ul_phr_db: float | None = None
    ul_bsr_bytes: int | None = None
    ul_pusch_rssi_db: float | None = None
    ul_pucch_rssi_db: float | None = None
    dl_buffered_bytes: int = 0
    ul_buffered_bytes: int = 0
    dl_total_bytes: int = 0
    ul_total_bytes: int = 0


class StatusResult(Model):
    state: EnbState
    pid: int | None
    uptime_s: float | None
    exit_code: int | None
    error_line: str | None = Field(description="srsenb's own error line when it exited on one")
    restarts: int = Field(description="srsenb starts since the agent began, the first included")
    connected_rntis: list[int]
    ground_truth: SrGroundTruth | None = Field(description="the last attached UE's SR config (after an attach)")
    last_metrics: list[UeMetrics]
    n_prb: int | None
    sr_period_ms: int | None
    dl_earfcn: int | None


class CellGainParams(Model):
    """What the attenuator room's `srsenb-cell-gain` driver sends: srsENB stdin `cell_gain <cell_id> <gain_db>`."""

    cell_id: int = Field(ge=0, le=255)
    gain_db: float = Field(ge=-200, le=100)


class CellGainResult(Model):
    ok: bool
    cell_id: int
    gain_db: float


class SafeStateResult(Model):
    stopped: bool = Field(description="srsenb was running and is now stopped (no RF transmission)")


class EnbSelfCheckParams(Model):
    """What the inventory says of the radio: a USRP (uhd, with its device arguments) or srsRAN's ZMQ radio."""

    rf: Literal["uhd", "zmq"] = "uhd"
    device_args: str = Field("", max_length=256, pattern=r"^[A-Za-z0-9_.,=:/-]*$",
                             description="UHD device arguments (serial=..., addr=...), one argv word")


CONFIGURE = Op("configure", ConfigureParams, ConfigureResult,
               "render the profile (+ run overrides) and (re)start srsenb when a restart parameter changed")
STATUS = Op("status", Empty, StatusResult, "process state, connected UEs, SR ground truth, last metrics")
CELL_GAIN = Op("cell_gain", CellGainParams, CellGainResult, "software gain of one cell (srsENB stdin)")
SAFE_STATE = Op("safe_state", Empty, SafeStateResult, "stop srsenb (no transmission)")
SELF_CHECK = Op("self_check", EnbSelfCheckParams, SelfCheckResult,
                "read-only: srsenb found, SCTP, the USRP (uhd) answering, the host clock")

ENB_CONTRACT = Contract("enb", (CONFIGURE, STATUS, CELL_GAIN, SAFE_STATE, SELF_CHECK),
                        telemetry={"ue_metrics": UeMetrics, "sr_ground_truth": SrGroundTruth})


class EnbClient(RoleClient):
    contract = ENB_CONTRACT

    def configure(self, params: ConfigureParams, timeout_s: float | None = None) -> ConfigureResult:
        return self.call(CONFIGURE, params, timeout_s=timeout_s or params.ready_timeout_s + 15)

    def status(self) -> StatusResult:
        return self.call(STATUS)

    def cell_gain(self, cell_id: int, gain_db: float) -> CellGainResult:
        return self.call(CELL_GAIN, CellGainParams(cell_id=cell_id, gain_db=gain_db))

    def safe_state(self) -> SafeStateResult:
        return self.call(SAFE_STATE, timeout_s=20)

    def self_check(self, params: EnbSelfCheckParams, timeout_s: float | None = None) -> SelfCheckResult:
        return self.call(SELF_CHECK, params, timeout_s)
