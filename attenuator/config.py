"""Inventory entry of one attenuator (what exists and where); the lab inventory embeds this model as-is."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

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

    name: str = Field(min_length=1, description="inventory name, e.g. 'box1-atten'")
    model: Model
    transport: Transport
    address: str = Field("", description="device path, host:port, URL, VISA resource or ZeroMQ endpoint")
    channels: int = Field(1, ge=1, le=64)
    min_db: float = Field(0.0, ge=0.0, description="lab safety floor: protects phone and USRP receivers")
    max_db: float = Field(gt=0.0, description="lab ceiling (≤ the device range)")
    step_db: float = Field(0.25, gt=0.0, le=10.0, description="device step; values are quantized to it")
    max_slew_db_per_s: float | None = Field(None, gt=0.0, description="largest allowed change rate")
    safe_db: float | None = Field(None, description="value on error/disconnect/exit; default max_db")
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
        return self

    @property
    def safe_value_db(self) -> float:
        return self.max_db if self.safe_db is None else self.safe_db

    def option(self, key: str, default: object) -> object:
        return self.options.get(key, default)

    @property
    def min_interval_s(self) -> float:
        return float(self.option("min_interval_s", MODEL_MIN_INTERVAL_S.get(self.model, 0.0)))  # type: ignore[arg-type]


def load_config(path: str | Path, name: str | None = None) -> AttenuatorConfig:
    """One attenuator from a YAML file: either the entry itself or a mapping with `attenuators: [...]`."""
    from pydantic import ValidationError

    from cellab.errors import InputError, from_validation_error, read_yaml

    p = Path(path)
    data = read_yaml(p)
    prefix = ""
    if isinstance(data, dict) and isinstance(data.get("attenuators"), list):
        entries = [e for e in data["attenuators"] if isinstance(e, dict)]
        names = [str(e.get("name")) for e in entries]
        if name is None and len(entries) == 1:
            data, prefix = entries[0], "attenuators[0]"
        elif name in names:
            idx = names.index(name)
            data, prefix = entries[idx], f"attenuators[{idx}]"
        else:
            raise InputError(p, "attenuators", f"choose one attenuator by name (got {name!r})", names)
    if not isinstance(data, dict):
        raise InputError(p, "", "expected a mapping (one attenuator entry)", list(AttenuatorConfig.model_fields))
    try:
        return AttenuatorConfig.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(p, exc, prefix) from None
