"""Campaign files: what to vary, how often, in which order, with which workload.

A campaign is a factor matrix (every combination of the factor values) times `repeat`, run on one
lab. Factor and fixed names are run parameters: the transport parameters below plus those of the
chosen lab (wired: rate_mbit, buffer_bytes...; virtual: n_prb, sr_period_ms...).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from cellab.errors import CellabError, InputError, InputErrors, from_validation_error, read_yaml

KERNEL_CCS = ("cubic", "reno", "bbr")
BPF_CCS = ("c2tcp", "scubic", "exll", "cubic_qarr", "cubic_barr")  # server-modules, loaded per campaign
CONGESTION_CONTROLS = KERNEL_CCS + BPF_CCS
RECEIVER_CONTROLS = ("none", "exll", "dfcsd")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class TransportParams(Strict):
    """Run parameters every lab understands."""

    cc: Literal[CONGESTION_CONTROLS] = "cubic"  # type: ignore[valid-type]
    receiver: Literal[RECEIVER_CONTROLS] = "none"  # type: ignore[valid-type]


class Order(Strict):
    mode: Literal["sequential", "randomized"] = "sequential"
    seed: int = 0


class Workload(Strict):
    kind: Literal["download", "upload"] = "download"
    tool: Literal["iperf3"] = "iperf3"
    duration_s: float = Field(10.0, gt=0, le=3600)
    flows: int = Field(1, ge=1, le=16)
    ping_interval_ms: float | None = Field(200.0, ge=10, le=10_000, description="concurrent ping for RTT; null = off")


class Timeouts(Strict):
    run_s: float = Field(300.0, gt=0, description="whole run, configure to collect")
    request_s: float = Field(30.0, gt=0, description="one bus request (workload requests get duration + this)")


class Retry(Strict):
    max_attempts: int = Field(1, ge=1, le=10)
    backoff_s: float = Field(2.0, ge=0, le=600)


MEASUREMENTS = ("throughput", "rtt", "tcp_info")


class Campaign(Strict):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    description: str = ""
    lab: str = "virtual"
    repeat: int = Field(1, ge=1, le=1000)
    order: Order = Order()
    factors: dict[str, list[Any]] = {}
    fixed: dict[str, Any] = {}
    workload: Workload = Workload()
    measurements: list[Literal[MEASUREMENTS]] = ["throughput", "rtt"]  # type: ignore[valid-type]
    timeouts: Timeouts = Timeouts()
    retry: Retry = Retry()


class PlannedRun(BaseModel):
    index: int
    run_id: str
    repeat: int
    factors: dict[str, Any]
    params: dict[str, Any]  # factors + fixed + defaults: everything the run is configured with


def run_id(factors: dict[str, Any], repeat: int) -> str:
    """Stable id: the same factor values and repeat give the same id in every plan."""
    key = json.dumps(factors, sort_keys=True, separators=(",", ":")) + f"#{repeat}"
    return hashlib.sha1(key.encode()).hexdigest()[:10]


def lab_params_model(lab: str, source: str | Path) -> type[BaseModel] | None:
    """The lab's own parameter model (None for a lab inventory file: its devices decide)."""
    from cellab.labs import EMBEDDED_LABS, embedded_lab_class

    if lab in EMBEDDED_LABS:
        try:
            return embedded_lab_class(lab).params_model
        except CellabError as exc:
            raise InputError(source, "lab", str(exc)) from exc
    if not lab.endswith((".yaml", ".yml")):
        raise InputError(source, "lab", f"unknown lab {lab!r}", list(EMBEDDED_LABS) + ["<lab inventory>.yaml"])
    return None


def params_model_for(lab: str, source: str | Path) -> type[BaseModel]:
    lab_model = lab_params_model(lab, source)
    fields: dict[str, Any] = {}
    for model in filter(None, (TransportParams, lab_model)):
        for name, info in model.model_fields.items():
            fields[name] = (info.annotation, info)
    return create_model("RunParams", __config__=ConfigDict(extra="forbid"), **fields)


def load_campaign(path: str | Path, lab: str | None = None) -> Campaign:
    """Read and validate a campaign; `lab` overrides the file's lab (the CLI's --lab)."""
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "", "a campaign is a YAML mapping (name, lab, factors, ...)")
    if lab is not None:
        data["lab"] = lab
    # A lab inventory named in the file is relative to the file; one given with --lab, to the caller.
    lab_value = data.get("lab")
    if isinstance(lab_value, str) and lab_value.endswith((".yaml", ".yml")):
        base = Path.cwd() if lab is not None else path.parent
        data["lab"] = str((base / lab_value).resolve())
    try:
        campaign = Campaign(**data)
    except ValidationError as exc:
        raise from_validation_error(path, exc) from exc
    validate_parameters(campaign, path)
    return campaign


def validate_parameters(campaign: Campaign, source: str | Path) -> None:
    """Factor and fixed names must be run parameters of the lab; every value must be allowed."""
    model = params_model_for(campaign.lab, source)
    known = sorted(model.model_fields)
    errors: list[InputError] = []
    for section, names in (("factors", campaign.factors), ("fixed", campaign.fixed)):
        for name in names:
            if name not in model.model_fields:
                errors.append(InputError(source, f"{section}.{name}", "unknown parameter", known))
    receivers = campaign.factors.get("receiver", []) + [campaign.fixed.get("receiver", "none")]
    if any(r != "none" for r in receivers) and campaign.workload.tool == "iperf3":
        errors.append(InputError(source, "factors.receiver" if "receiver" in campaign.factors else "fixed.receiver",
                                 "receiver control (exll, dfcsd) runs in cellab-probe, not with the iperf3 workload",
                                 ["none"]))
    for name in set(campaign.factors) & set(campaign.fixed):
        errors.append(InputError(source, f"fixed.{name}", "is also a factor; keep it in one place"))
    for name, values in campaign.factors.items():
        if not values:
            errors.append(InputError(source, f"factors.{name}", "empty list: a factor needs at least one value"))
        if len({json.dumps(v, sort_keys=True) for v in values}) != len(values):
            errors.append(InputError(source, f"factors.{name}", "repeated value"))
    if errors:
        raise InputErrors(errors)
    for name, values in campaign.factors.items():
        for i, value in enumerate(values):
            _check_value(model, source, f"factors.{name}[{i}]", name, value, errors)
    for name, value in campaign.fixed.items():
        _check_value(model, source, f"fixed.{name}", name, value, errors)
    if errors:
        raise InputErrors(errors)


def _check_value(model: type[BaseModel], source: str | Path, field: str, name: str, value: Any,
                 errors: list[InputError]) -> None:
    try:
        model(**{name: value})
    except ValidationError as exc:
        for err in from_validation_error(source, exc).errors:
            errors.append(InputError(source, field, err.message, err.allowed))


def plan(campaign: Campaign, source: str | Path = "<campaign>") -> list[PlannedRun]:
    """Every factor combination × repeat, in sequential or seeded-random order."""
    model = params_model_for(campaign.lab, source)
    names = sorted(campaign.factors)
    combos = [dict(zip(names, values, strict=True)) for values in itertools.product(*(campaign.factors[n] for n in names))]
    cells = [(factors, rep) for rep in range(campaign.repeat) for factors in combos]
    if campaign.order.mode == "randomized":
        random.Random(campaign.order.seed).shuffle(cells)
    runs = []
    for index, (factors, rep) in enumerate(cells):
        params = model(**campaign.fixed, **factors).model_dump(mode="json")
        runs.append(PlannedRun(index=index, run_id=run_id(factors, rep), repeat=rep, factors=factors, params=params))
    return runs
