"""The attenuator agent: typed operations on this host's attenuators, schedules played in the background.

Operations (pydantic params, validated by the bus before they reach us): configure, set, get, info,
play_schedule, stop_schedule, status, calibrate. Schedules come as CSV/YAML text or a list of points
and go through the same parsers and safety checks as files; nothing from the wire reaches a shell.
safe_state() stops playback and sends every channel to its safe value (default: max attenuation).
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cellab.bus import Agent, OperationFailed, operation
from cellab.contracts import implements
from cellab.contracts.attenuator import (
    ATTENUATOR_CONTRACT,
    WIRE_FORBIDDEN_OPTIONS,
    AttenuatorSelfCheckParams,
    ChannelParams,
    ChannelsToRead,
    ConfigureParams,
    ConfigureResult,
    PlayParams,
    PlayStarted,
    SetParams,
    SetResult,
    StopParams,
    Target,
)
from cellab.contracts.health import CheckItem, SelfCheckResult, clock_sync_check, fail, ok
from cellab.errors import CellabError

from .calibration import Calibration, CalibrationStore, FitPolicy, cell_rsrp_reader, fit, sweep
from .config import AttenuatorConfig, load_config
from .driver import Attenuator, DeviceInfo, create
from .drivers.srsenb import EnbSend
from .player import Player, PlayResult
from .schedule import Schedule, parse_csv, parse_yaml



class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CalibrateParams(Target):
    channel: int = Field(1, ge=1, le=64)
    shield_box: str = Field(min_length=1, max_length=80)
    ue: str = Field(min_length=1, max_length=80)
    earfcn: int = Field(ge=0, le=262143)
    start_db: float = Field(allow_inf_nan=False)
    stop_db: float = Field(allow_inf_nan=False)
    step_db: float = Field(gt=0, allow_inf_nan=False)
    settle_s: float = Field(1.0, ge=0, le=60)
    samples: int = Field(3, ge=1, le=100)
    cell_ctl: str = Field(description="emulated cell control endpoint whose stats give rsrp_dbm per UE")
    ue_index: int = Field(0, ge=0)
    policy: FitPolicy = Field(default_factory=FitPolicy)


class AttenuatorStatus(_Strict):
    attenuator: str
    playing: bool
    applied: int = 0
    planned: int = 0
    last_result: PlayResult | None = None
    calibrating: bool = False
    calibration: Calibration | None = None
    calibration_error: str = ""


class StatusResult(_Strict):
    attenuators: list[AttenuatorStatus]


class _Slot:
    """One attenuator with its player and calibration job."""

    def __init__(self, config: AttenuatorConfig, driver: Attenuator):
        self.config, self.driver = config, driver
        self.player: Player | None = None
        self.last_result: PlayResult | None = None
        self.calibration_thread: threading.Thread | None = None
        self.calibration: Calibration | None = None
        self.calibration_error = ""
        self.stop_calibration = threading.Event()


class AttenuatorOps:
    """Mixin for the room's Agent: needs `publish(topic, data)` and `artifact_dir` from the host."""

    publish: Any
    artifact_dir: Path
    enb_send: EnbSend | None = None  # what `srsenb-cell-gain` entries send through (relay.py)

    # ----- state -----
    def _slots(self) -> dict[str, _Slot]:
        slots = self.__dict__.get("_attenuator_slots")
        if slots is None:
            slots = self.__dict__["_attenuator_slots"] = {}
            self.__dict__["_attenuator_lock"] = threading.Lock()
        return slots

    def add_attenuators(self, configs: list[AttenuatorConfig], driver_kwargs: dict[str, dict] | None = None) -> None:
        """Open-on-demand drivers for these entries; driver_kwargs[name] goes to the backend (e.g. an
        eNB agent hosting srsenb-cell-gain passes {"send": its cell_gain function})."""
        driver_kwargs = driver_kwargs or {}
        slots = self._slots()
        for cfg in configs:
            old = slots.pop(cfg.name, None)
            if old is not None:
                self._stop_slot(old)
                old.driver.close()
            slots[cfg.name] = _Slot(cfg, create(cfg, **(driver_kwargs.get(cfg.name) or self._own_kwargs(cfg))))

    def _own_kwargs(self, cfg: AttenuatorConfig) -> dict[str, Any]:
        return {"send": self.enb_send} if cfg.transport == "enb-agent" and self.enb_send is not None else {}

    def _slot(self, name: str | None) -> _Slot:
        slots = self._slots()
        if not slots:
            raise OperationFailed("no attenuator configured on this agent: send `configure` first")
        if name is None:
            if len(slots) == 1:
                return next(iter(slots.values()))
            raise OperationFailed(f"attenuator: name one of {', '.join(sorted(slots))}")
        if name not in slots:
            raise OperationFailed(f"attenuator {name!r} unknown (allowed: {', '.join(sorted(slots))})")
        return slots[name]

    def _busy(self, slot: _Slot) -> bool:
        return (slot.player is not None and slot.player.running) or (
            slot.calibration_thread is not None and slot.calibration_thread.is_alive()
        )

    @staticmethod
    def _run(action: Any) -> Any:
        try:
            return action()
        except CellabError as exc:  # device refusal, limits, bad input: a domain error, not a crash
            raise OperationFailed(str(exc)) from exc

    # ----- operations -----
    @operation
    def configure(self, params: ConfigureParams) -> ConfigureResult:
        for i, cfg in enumerate(params.attenuators):
            wired = sorted(WIRE_FORBIDDEN_OPTIONS & set(cfg.options))
            if wired:
                # these name code to load (an SDK or VISA library): only the agent host's own config may set them
                raise OperationFailed(f"options {', '.join(wired)} can only be set in the agent's local config",
                                      field=f"params.attenuators[{i}].options")
        for slot in self._slots().values():
            if self._busy(slot):
                raise OperationFailed(f"attenuator {slot.config.name} is busy: stop_schedule first")
        self.add_attenuators(params.attenuators)
        return ConfigureResult(attenuators=sorted(self._slots()))

    @operation
    def set(self, params: SetParams) -> SetResult:
        slot = self._slot(params.attenuator)
        if self._busy(slot):
            raise OperationFailed(f"attenuator {slot.config.name} is playing a schedule or calibrating")
        applied = self._run(lambda: slot.driver.set(params.channel, params.db))
        self._publish_applied(slot, params.channel, applied)
        return SetResult(attenuator=slot.config.name, channel=params.channel, applied_db=applied)

    @operation
    def get(self, params: ChannelParams) -> SetResult:
        slot = self._slot(params.attenuator)
        value = self._run(lambda: slot.driver.get(params.channel))
        return SetResult(attenuator=slot.config.name, channel=params.channel, applied_db=value)

    @operation
    def info(self, params: Target) -> DeviceInfo:
        slot = self._slot(params.attenuator)
        return self._run(slot.driver.info)

    @operation
    def self_check(self, params: AttenuatorSelfCheckParams) -> SelfCheckResult:
        """Read-only: every channel asked answers a read, through the entry this agent holds, else through a
        driver opened for the check from the inventory's entry and closed again (nothing is set)."""
        items: list[CheckItem] = []
        for wanted in params.attenuators:
            items += self._read_channels(wanted)
        return SelfCheckResult(items=[*items, clock_sync_check()])

    def _read_channels(self, wanted: ChannelsToRead) -> list[CheckItem]:
        name = wanted.config.name
        held = self._slots().get(name)
        if held is None and WIRE_FORBIDDEN_OPTIONS & set(wanted.config.options):
            return [fail(name, "its options name a library only this host's config may set "
                               "(CELLAB_ATTENUATOR_CONFIG), and the agent does not hold it")]
        driver = held.driver if held is not None else create(wanted.config, **self._own_kwargs(wanted.config))
        try:
            return [self._read_one(driver, name, channel) for channel in wanted.channels]
        finally:
            if held is None:
                driver.close()

    @staticmethod
    def _read_one(driver: Attenuator, name: str, channel: int) -> CheckItem:
        check = f"{name} channel {channel}"
        try:
            return ok(check, f"reads {driver.get(channel):g} dB")
        except (CellabError, OSError) as exc:  # a device that is off, unplugged, or another one
            return fail(check, f"no answer to a read: {exc}")

    @operation
    def play_schedule(self, params: PlayParams) -> PlayStarted:
        slot = self._slot(params.attenuator)
        given = [x is not None for x in (params.schedule_csv, params.schedule_yaml, params.points)]
        if sum(given) != 1:
            raise OperationFailed("give exactly one of schedule_csv, schedule_yaml, points")
        if self._busy(slot):
            raise OperationFailed(f"attenuator {slot.config.name} is busy: stop_schedule first")
        source = f"{params.name} (from the controller)"

        def build() -> Player:
            if params.schedule_csv is not None:
                sched = parse_csv(params.schedule_csv, source)
            elif params.schedule_yaml is not None:
                sched = parse_yaml(params.schedule_yaml, source)
            else:
                pts = sorted(params.points or [], key=lambda p: p.t_s)
                if not pts:
                    raise OperationFailed("points: empty schedule")
                sched = Schedule(name=source, points=pts, duration_s=pts[-1].t_s)
            folder = Path(self.artifact_dir)
            folder.mkdir(parents=True, exist_ok=True)
            log = folder / f"attenuation-{slot.config.name}-{params.name}-{time.strftime('%Y%m%dT%H%M%S')}.{params.log_format}"
            return Player(slot.driver, sched, log_path=log, publish=self._safe_publish,
                          safe_on_finish=params.safe_on_finish)

        player = self._run(build)
        slot.last_result = None

        def done(result: PlayResult) -> None:
            slot.last_result = result
            self._safe_publish("attenuation.done", {"attenuator": slot.config.name, **result.model_dump()})

        player.on_done = done
        slot.player = player.start()
        return PlayStarted(attenuator=slot.config.name, points=len(player.schedule.points),
                           duration_s=player.schedule.duration_s, clipped=player.schedule.clip_report.clipped,
                           log_file=str(player.log_path.name if player.log_path else ""))

    @operation
    def stop_schedule(self, params: StopParams) -> AttenuatorStatus:
        slot = self._slot(params.attenuator)
        self._stop_slot(slot, hold=params.hold)
        return self._status(slot)

    @operation(concurrent=True)
    def status(self, params: Target) -> StatusResult:
        slots = [self._slot(params.attenuator)] if params.attenuator else list(self._slots().values())
        return StatusResult(attenuators=[self._status(s) for s in slots])

    @operation
    def calibrate(self, params: CalibrateParams) -> AttenuatorStatus:
        slot = self._slot(params.attenuator)
        if self._busy(slot):
            raise OperationFailed(f"attenuator {slot.config.name} is busy")
        count = abs(params.stop_db - params.start_db) / params.step_db + 1
        if count > 500:
            raise OperationFailed(f"calibration sweep of {count:.0f} steps: at most 500")
        slot.calibration, slot.calibration_error = None, ""
        slot.stop_calibration.clear()

        def job() -> None:
            try:
                points = sweep(slot.driver, params.channel, cell_rsrp_reader(params.cell_ctl, params.ue_index),
                               params.start_db, params.stop_db, params.step_db, settle_s=params.settle_s,
                               samples=params.samples, should_stop=slot.stop_calibration.is_set)
                cal = fit(points, params.shield_box, params.ue, params.earfcn, params.policy)
                CalibrationStore(Path(self.artifact_dir) / "calibrations").save(cal)
                slot.calibration = cal
            except Exception as exc:  # noqa: BLE001 - reported through status
                slot.calibration_error = f"{type(exc).__name__}: {exc}"
            finally:
                slot.driver.safe_state()

        slot.calibration_thread = threading.Thread(target=job, name=f"calibrate-{slot.config.name}", daemon=True)
        slot.calibration_thread.start()
        return self._status(slot)

    # ----- helpers -----
    def _status(self, slot: _Slot) -> AttenuatorStatus:
        p = slot.player
        return AttenuatorStatus(
            attenuator=slot.config.name,
            playing=p is not None and p.running,
            applied=p.applied if p else 0,
            planned=len(p.schedule.points) if p else 0,
            last_result=slot.last_result,
            calibrating=slot.calibration_thread is not None and slot.calibration_thread.is_alive(),
            calibration=slot.calibration,
            calibration_error=slot.calibration_error,
        )

    def _stop_slot(self, slot: _Slot, hold: bool = False) -> None:
        if slot.player is not None and slot.player.running:
            slot.player.stop(hold=hold)
            slot.player.wait(10)
        slot.stop_calibration.set()
        if slot.calibration_thread is not None:
            slot.calibration_thread.join(30)

    def _safe_publish(self, topic: str, data: dict) -> None:
        try:
            self.publish(topic, data)
        except Exception:  # noqa: BLE001 - telemetry loss must not stop a schedule
            pass

    def _publish_applied(self, slot: _Slot, channel: int, db: float) -> None:
        self._safe_publish("attenuation", {"attenuator": slot.config.name, "channel": channel, "db": db,
                                           "readback_db": db, "source": "set"})

    def attenuators_safe_state(self) -> dict[str, dict[int, str]]:
        out: dict[str, dict[int, str]] = {}
        for name, slot in self._slots().items():
            self._stop_slot(slot)
            out[name] = slot.driver.safe_state()
        return out


@implements(ATTENUATOR_CONTRACT)
class AttenuatorAgent(AttenuatorOps, Agent):
    """Role "attenuator". Attenuators come from `attenuators=` or `attenuator_config=` (YAML path,
    also $CELLAB_ATTENUATOR_CONFIG), or later from the controller's `configure` operation."""

    role = "attenuator"

    def __init__(self, *args: Any, attenuators: list[AttenuatorConfig] | None = None,
                 attenuator_config: str | Path | None = None, enb_send: EnbSend | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.enb_send = enb_send
        configs = list(attenuators or [])
        path = attenuator_config or os.environ.get("CELLAB_ATTENUATOR_CONFIG")
        if path:
            configs += _load_all(Path(path))
        if configs:
            self.add_attenuators(configs)

    def safe_state(self) -> None:
        self.attenuators_safe_state()
        parent = getattr(super(), "safe_state", None)
        if callable(parent):
            parent()


def _load_all(path: Path) -> list[AttenuatorConfig]:
    import yaml

    data = yaml.safe_load(path.read_text()) if path.exists() else None
    if isinstance(data, dict) and isinstance(data.get("attenuators"), list):
        return [load_config(path, str(e.get("name"))) for e in data["attenuators"] if isinstance(e, dict)]
    return [load_config(path)]
