"""The attenuator role: the inventory entry of one programmable attenuator, and the operations of the
attenuator agent that drives it (set, info, schedules played in the background, safe state).

The entry (what exists and where) is the lab inventory's; the agent (how to talk to it) is the attenuator
room's, registered as `attenuator.any`."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, model_validator

from cellab.contracts.attenuator_options import option_problem
from cellab.contracts.base import Contract, Model as ContractModel, Op, RoleClient
from cellab.contracts.health import SelfCheckResult
from cellab.inputs import Name

Model = Literal[
    "minicircuits-rudat",
    "minicircuits-rcdat",
    "minicircuits-rc4dat",
    "jfw-50pa",
    "jfw-50ba",
    "adaura",
    "vaunix-lda",
    "keysight-11713c",
    "srsenb-cell-gain",
    "virtual",
]
Transport = Literal["serial", "telnet", "http", "usb-hid", "visa", "zmq", "enb-agent", "sdk"]

# Which transports each model speaks (anchors.md §3); the factory refuses other pairs.
MODEL_TRANSPORTS: dict[str, tuple[str, ...]] = {
    "minicircuits-rudat": ("serial", "usb-hid", "http", "telnet"),
    "minicircuits-rcdat": ("serial", "usb-hid", "http", "telnet"),
    "minicircuits-rc4dat": ("usb-hid", "http", "telnet", "serial"),
    "jfw-50pa": ("telnet", "serial"),
    "jfw-50ba": ("telnet", "serial"),
    "adaura": ("serial", "telnet", "http"),
    "vaunix-lda": ("sdk",),
    "keysight-11713c": ("visa",),
    "srsenb-cell-gain": ("enb-agent",),
    "virtual": ("zmq",),
}

# Shortest update spacing a model tolerates unless options.min_interval_s says otherwise: the 11713C
# switches mechanical relays (wear, milliseconds of bounce), so schedules faster than 1 Hz are refused.
MODEL_MIN_INTERVAL_S: dict[str, float] = {"keysight-11713c": 1.0}


class AttenuatorConfig(BaseModel):
    """One programmable attenuator of a lab. Channels are numbered 1..channels."""

    model_config = ConfigDict(extra="forbid")

    name: Name = Field(description="inventory name, e.g. 'box1-atten'")
    model: Model
    transport: Transport
    address: str = Field("", description="device path, host:port, URL, VISA resource or ZeroMQ endpoint")
    channels: int = Field(1, ge=1, le=64)
    # 200 dB: beyond any programmable attenuator (the largest go to about 127 dB); a bigger value is a typo
    min_db: float = Field(0.0, ge=0.0, le=200.0, allow_inf_nan=False,
                          description="lab safety floor: protects phone and USRP receivers")
    max_db: float = Field(gt=0.0, le=200.0, allow_inf_nan=False, description="lab ceiling (≤ the device range)")
    step_db: float = Field(0.25, gt=0.0, le=10.0, description="device step; values are quantized to it")
    max_slew_db_per_s: float | None = Field(None, gt=0.0, le=1e6, allow_inf_nan=False,
                                            description="largest allowed change rate")
    safe_db: float | None = Field(None, allow_inf_nan=False, description="value on error/disconnect/exit; default max_db")
    timeout_s: float = Field(2.0, gt=0.0, le=60.0)
    verify_readback: bool = True
    options: dict[str, str | int | float | bool] = Field(
        default_factory=dict, description="backend-specific settings (baudrate, cell_id, library, ...)"
    )

    @model_validator(mode="after")
    def _check(self) -> AttenuatorConfig:
        allowed = MODEL_TRANSPORTS[self.model]
        if self.transport not in allowed:
            raise ValueError(f"transport {self.transport!r} is not available for {self.model} (allowed: {', '.join(allowed)})")
        if self.min_db >= self.max_db:
            raise ValueError(f"min_db ({self.min_db}) must be below max_db ({self.max_db})")
        if self.safe_db is not None and not self.min_db <= self.safe_db <= self.max_db:
            raise ValueError(f"safe_db ({self.safe_db}) must lie within [min_db, max_db] = [{self.min_db}, {self.max_db}]")
        if self.step_db > self.max_db - self.min_db:
            raise ValueError(f"step_db ({self.step_db}) is larger than the range [min_db, max_db] = [{self.min_db}, "
                             f"{self.max_db}]: no step could be played")
        for key, value in self.options.items():
            problem = option_problem(key, value)
            if problem:
                raise ValueError(f"options.{key}: {problem[0]} (allowed: {', '.join(map(str, problem[1]))})")
        return self

    @property
    def safe_value_db(self) -> float:
        return self.max_db if self.safe_db is None else self.safe_db

    def option(self, key: str, default: object) -> object:
        return self.options.get(key, default)

    @property
    def min_interval_s(self) -> float:
        return float(self.option("min_interval_s", MODEL_MIN_INTERVAL_S.get(self.model, 0.0)))  # type: ignore[arg-type]



MAX_SCHEDULE_TEXT = 8_000_000  # bytes of CSV/YAML accepted over the bus
# options that name code to load (an SDK or VISA library): only the agent host's own config may set them
WIRE_FORBIDDEN_OPTIONS = frozenset({"library", "visa_backend"})


class Point(BaseModel):
    """One planned attenuation: at t_s after the schedule starts, channel goes to db."""

    model_config = ConfigDict(frozen=True)
    t_s: float
    channel: int
    db: float
    source: str = ""  # "row 7" or "segment 2 (ramp)"


class ConfigureParams(ContractModel):
    attenuators: list[AttenuatorConfig] = Field(min_length=1)


class ConfigureResult(ContractModel):
    attenuators: list[str]


class Target(ContractModel):
    attenuator: str | None = Field(None, description="inventory name; may be omitted when the agent has one")


class SetParams(Target):
    channel: int = Field(ge=1, le=64)
    db: float = Field(allow_inf_nan=False)


class ChannelParams(Target):
    channel: int = Field(ge=1, le=64)


class SetResult(ContractModel):
    attenuator: str
    channel: int
    applied_db: float


class DeviceInfo(BaseModel):
    model: str
    serial: str
    firmware: str = ""
    channels: int
    min_db: float
    max_db: float
    step_db: float
    # Shortest interval between updates the device tolerates (mechanical relays wear out).
    min_interval_s: float = 0.0


class PlayParams(Target):
    schedule_csv: str | None = Field(None, max_length=MAX_SCHEDULE_TEXT)
    schedule_yaml: str | None = Field(None, max_length=MAX_SCHEDULE_TEXT)
    points: list[Point] | None = Field(None, max_length=2_000_000)
    name: str = Field("schedule", pattern=r"^[A-Za-z0-9_.-]{1,80}$", description="used in the log file name")
    log_format: Literal["jsonl", "csv"] = "jsonl"
    safe_on_finish: bool = False


class PlayStarted(ContractModel):
    attenuator: str
    points: int
    duration_s: float
    clipped: int
    log_file: str


class StopParams(Target):
    hold: bool = Field(False, description="keep the last value played (else the box goes to its safe state)")


class Applied(ContractModel):
    """Telemetry `applied`: one value the device took."""

    attenuator: str
    channel: int
    db: float
    t: float = Field(description="wall-clock time of the agent")


CONFIGURE = Op("configure", ConfigureParams, ConfigureResult, "take the inventory's entries")
SET = Op("set", SetParams, SetResult, "one channel to one value now")
GET = Op("get", ChannelParams, SetResult, "one channel's value read back from the device now")
INFO = Op("info", Target, DeviceInfo, "the device's identity and range")
PLAY_SCHEDULE = Op("play_schedule", PlayParams, PlayStarted, "play a schedule in the background")
class ScheduleStatus(BaseModel):
    """What stop_schedule reports; the agent adds its player's result and calibration state."""

    model_config = ConfigDict(extra="allow")
    attenuator: str
    playing: bool


STOP_SCHEDULE = Op("stop_schedule", StopParams, ScheduleStatus, "stop playing; the channel keeps its value")


class ChannelsToRead(ContractModel):
    """One attenuator as the inventory describes it, and the channels its UEs use."""

    config: AttenuatorConfig
    channels: list[int] = Field(min_length=1, max_length=64)


class AttenuatorSelfCheckParams(ContractModel):
    attenuators: list[ChannelsToRead] = Field(default_factory=list, max_length=16)


SELF_CHECK = Op("self_check", AttenuatorSelfCheckParams, SelfCheckResult,
                "read-only: each attenuator answers a read on every channel asked, the host clock")
ATTENUATOR_CONTRACT = Contract("attenuator", (CONFIGURE, SET, GET, INFO, PLAY_SCHEDULE, STOP_SCHEDULE, SELF_CHECK),
                               telemetry={"applied": Applied})


class AttenuatorClient(RoleClient):
    contract = ATTENUATOR_CONTRACT

    def configure(self, attenuators: list[AttenuatorConfig], timeout_s: float | None = None) -> ConfigureResult:
        return self.call(CONFIGURE, ConfigureParams(attenuators=attenuators), timeout_s)

    def set(self, attenuator: str, channel: int, db: float, timeout_s: float | None = None) -> SetResult:
        return self.call(SET, SetParams(attenuator=attenuator, channel=channel, db=db), timeout_s)

    def get(self, attenuator: str, channel: int, timeout_s: float | None = None) -> SetResult:
        return self.call(GET, ChannelParams(attenuator=attenuator, channel=channel), timeout_s)

    def info(self, attenuator: str, timeout_s: float | None = None) -> DeviceInfo:
        return self.call(INFO, Target(attenuator=attenuator), timeout_s)

    def play_schedule(self, params: PlayParams, timeout_s: float | None = None) -> PlayStarted:
        return self.call(PLAY_SCHEDULE, params, timeout_s)

    def stop_schedule(self, attenuator: str | None = None, timeout_s: float | None = None, hold: bool = False) -> None:
        self.call(STOP_SCHEDULE, StopParams(attenuator=attenuator, hold=hold), timeout_s)

    def self_check(self, params: AttenuatorSelfCheckParams, timeout_s: float | None = None) -> SelfCheckResult:
        return self.call(SELF_CHECK, params, timeout_s)


class SchedulePlanning(Protocol):
    """What the controller needs of the attenuator room's schedule, replay and calibration logic, without
    importing the room: the room registers an object with these methods (entry point group
    `cellab.services`, name `attenuator`)."""

    def check_schedule_file(self, path: str, config: AttenuatorConfig) -> None:
        """Parse a schedule file and check it against the attenuator's limits; InputError naming the row."""

    def schedule_points(self, text: str, is_csv: bool, source: str) -> list[Point]:
        """The points a schedule text plays."""

    def points_csv(self, points: list[Point]) -> str:
        """Points as the schedule CSV the player reads."""

    def replay_drive_log(self, drive_log: str, calibration_json: str, channel: int, min_db: float, max_db: float,
                         step_db: float, smoothing_s: float) -> tuple[str, str]:
        """A drive log through a calibration: (schedule CSV, replay report JSON)."""

    def check_drive_log(self, path: str) -> None:
        """Parse a drive log (CSV t_s,rsrp_dbm or the Android agent's JSONL); InputError naming the row."""

    def check_calibration_file(self, path: str) -> str:
        """A calibration file's JSON, checked; InputError when it is not one."""

    def calibrate(self, config: AttenuatorConfig, set_db: Callable[[int, float], float],
                  read_rsrp_dbm: Callable[[], float], channel: int, start_db: float, stop_db: float, step_db: float,
                  settle_s: float, samples: int, shield_box: str, ue: str, earfcn: int) -> str:
        """Sweep the channel while reading the UE's RSRP and fit: the calibration JSON; CellabError on failure."""

    def virtual_lab_attenuator(self, pty_link: str, ues: int, max_db: float = 95.0) -> AttenuatorConfig:
        """The entry of the virtual lab's serial attenuator (a channel per UE, 0..max_db)."""


def planning() -> SchedulePlanning:
    from cellab.contracts.registry import load

    return load("cellab.services", "attenuator", "attenuator planning service")
