"""The reference of the files a person writes, generated from the models that validate them (`cellab schema`).

Campaign files (cellab/campaign/model.py), run parameters (the common ones and each lab's own params model), lab
inventories (cellab/inventory/model.py): every field with its type, unit, default, allowed values and description.
docs/campaign.md is this module's output (`cellab schema --out docs/campaign.md`); a test fails when it is
stale. Units come from field names (`_ms`, `_s`, `_db`, `_bytes`, `_mbit`, `_hz`, ...) and, failing that,
from a unit the description names in parentheses.

The same walk over the models tells error messages where a key belongs: `key_locations` (an unknown
`fixed.duration_s` is `workload.duration_s`) and `model_at` (the model an unknown key was found in).
"""

from __future__ import annotations

import json
import re
import typing
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from annotated_types import Ge, Gt, Le, Lt, MaxLen, MinLen
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from cellab.campaign.keys import RUN_PARAMS_SET_ELSEWHERE, embedded_lab_kinds
from cellab.errors import CellabError
from cellab.keyindex import container, is_model, members, nested_models

REGENERATE = "cellab schema --out docs/campaign.md"
TOPICS = ("all", "campaign", "inventory", "lab")

# Unit by field-name suffix, longest first (n_prb is a prefix rule below).
UNIT_SUFFIXES = (
    ("_db_per_s", "dB/s"), ("_dbm", "dBm"), ("_db", "dB"), ("_ms", "ms"), ("_s", "s"), ("_bytes", "bytes"),
    ("_mbit", "Mbit/s"), ("_kbps", "kbit/s"), ("_mhz", "MHz"), ("_hz", "Hz"), ("_pct", "%"), ("_fraction", "0..1"),
    ("_sdus", "SDUs"), ("_prb", "PRB"),
)
UNIT_IN_DESCRIPTION = re.compile(r"\((ms|s|dB|dBm|bytes|Mbit/s|kbit/s|Hz|MHz|PRB|%)\)")

# Descriptions for fields whose model has none yet (a Field(description=...) in the model wins over these).
NOTES: dict[tuple[str, str], str] = {
    ("Campaign", "name"): "the campaign's name: its result folder is runs/out/<name>-<stamp>/",
    ("Campaign", "description"): "free text, kept with the results",
    ("Campaign", "lab"): "an embedded lab ({labs}) or a lab inventory file (relative to the campaign file)",
    ("Campaign", "repeat"): "how many times each factor combination runs",
    ("Campaign", "order"): "the order of the runs",
    ("Campaign", "factors"): "parameter -> list of values (every combination is a run), or a bundle: level "
                             "name -> the parameters it sets",
    ("Campaign", "fixed"): "parameter -> value for every run (under the factors' values)",
    ("Campaign", "schedules"): "attenuation schedules by name, for the `schedule` parameter",
    ("Campaign", "workload"): "the traffic of each run",
    ("Campaign", "measurements"): "what each run measures (pcap: the server captures its side)",
    ("Campaign", "timeouts"): "time limits of a run and of one bus request",
    ("Campaign", "retry"): "when a failed run is tried again",
    ("Order", "mode"): "sequential: the plan's order; randomized: shuffled with `seed`",
    ("Order", "seed"): "the shuffle's seed (randomized) and the run's seed in the manifest",
    ("Retry", "max_attempts"): "attempts per run (1: no retry)",
    ("Retry", "backoff_s"): "wait between attempts",
    ("Workload", "kind"): "iperf3: download (server to UE) or upload; probe: download",
    ("Workload", "tool"): "iperf3 (with a concurrent ping), or probe: cellab-send on the server, cellab-probe "
                          "on the UE (receiver control, sized flows, SR probes)",
    ("Workload", "duration_s"): "length of each flow (timed flows)",
    ("Workload", "flows"): "parallel flows toward each UE",
    ("TransportParams", "cc"): "the server's congestion control (BPF modules are loaded for the campaign)",
    ("TransportParams", "receiver"): "the probe's receiver-side window control",
    ("UESpec", "cc"): "this UE's congestion control; null: the run's `cc`",
    ("UESpec", "receiver"): "this UE's receiver control; null: the run's `receiver`",
}

# Run parameters a lab model has but a campaign sets another way (cellab/campaign/model.py refuses them by name).
INVENTORY_ATTENUATION_NOTE = ("attenuation on the attenuator channel in front of each UE "
                              "(devices.ues[].attenuator); null: unchanged")


@dataclass
class FieldDoc:
    name: str
    type: str
    unit: str
    default: str
    allowed: str
    description: str


@dataclass
class Section:
    path: str  # where its keys go: "workload", "schedules.NAME", "devices.ues[]", "" for the top level
    model: type[BaseModel]
    title: str = ""
    intro: str = ""
    fields: list[FieldDoc] = field(default_factory=list)


def _scalar_name(value: Any) -> str:
    return {bool: "bool", int: "integer", float: "number", str: "text"}.get(type(value), type(value).__name__)


def type_text(annotation: Any, path: str) -> str:
    """A type for people: integer, number, text, path, list of ..., mapping text -> ..., see `section`."""
    parts: list[str] = []
    for member in members(annotation):
        if member is type(None):
            text = "null"
        elif member is Any:
            text = "any"
        elif typing.get_origin(member) is Literal:
            names = []
            for value in typing.get_args(member):
                if _scalar_name(value) not in names:
                    names.append(_scalar_name(value))
            text = " or ".join(names)
        elif is_model(member):
            text = f"mapping (`{path}`)" if path else "mapping"
        elif (inner := container(member)) is not None:
            kind, item = inner
            if kind == "list":
                value = type_text(item, f"{path}[]")
                text = "list of " + (f"({value})" if " or " in value else value)
            else:
                args = typing.get_args(member)
                key = type_text(args[0], path) if args else "text"
                value = type_text(item, f"{path}.NAME")
                text = f"mapping {key} → " + (f"({value})" if " or " in value else value)
        elif isinstance(member, type) and issubclass(member, Path):
            text = "path"
        elif member in (bool, int, float, str):
            text = _scalar_name(member())
        else:
            text = getattr(member, "__name__", str(member))
        if text not in parts:
            parts.append(text)
    # "null" last reads best: "number or null"
    return " or ".join(sorted(parts, key=lambda p: p == "null"))


def _literals(annotation: Any, depth: int = 0) -> list[Any]:
    """Literal values allowed anywhere in the annotation (a list of literals, a literal-keyed mapping)."""
    found: list[Any] = []
    for member in members(annotation):
        if typing.get_origin(member) is Literal:
            found += list(typing.get_args(member))
        elif (inner := container(member)) is not None and depth < 3:
            args = typing.get_args(member)
            if inner[0] == "dict" and args:
                found += _literals(args[0], depth + 1)  # the keys
            found += _literals(inner[1], depth + 1)
    return found


def value_text(value: Any) -> str:
    """A value as it is written in YAML."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value if value else '""'
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(value_text(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{value_text(k)}: {value_text(v)}" for k, v in value.items()) + "}"
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e15:
        return f"{value:.1f}"
    return json.dumps(value) if isinstance(value, (int, float)) else str(value)


def _number(value: float) -> str:
    return value_text(int(value)) if isinstance(value, float) and value.is_integer() else value_text(value)


def allowed_text(info: FieldInfo) -> str:
    literals = _literals(info.annotation)
    parts = []
    if literals:
        keyed = all(typing.get_origin(m) is not Literal and container(m) and container(m)[0] == "dict"
                    for m in members(info.annotation) if m is not type(None))
        parts.append(("keys: " if keyed else "") + ", ".join(value_text(v) for v in dict.fromkeys(literals)))
    low = high = None
    length: list[str] = []
    for meta in info.metadata:
        if isinstance(meta, Ge):
            low = f"{_number(meta.ge)} ≤"
        elif isinstance(meta, Gt):
            low = f"{_number(meta.gt)} <"
        elif isinstance(meta, Le):
            high = f"≤ {_number(meta.le)}"
        elif isinstance(meta, Lt):
            high = f"< {_number(meta.lt)}"
        elif isinstance(meta, MinLen):
            length.append(f"at least {meta.min_length}")
        elif isinstance(meta, MaxLen):
            length.append(f"at most {meta.max_length}")
        elif getattr(meta, "pattern", None):
            parts.append(f"matching `{meta.pattern}`")
    if low and high:
        parts.append(f"{low} value {high}")
    elif low:
        number, sign = low.rsplit(" ", 1)
        parts.append(f"value {'≥' if sign == '≤' else '>'} {number}")
    elif high:
        parts.append(f"value {high}")
    if length:
        parts.append(("items: " if "list" in type_text(info.annotation, "") else "length: ") + ", ".join(length))
    options = members(info.annotation)
    others = [m for m in options if m is not type(None) and typing.get_origin(m) is not Literal]
    if literals and others and container(others[0]) is None:
        parts.append("or " + " or ".join(type_text(m, "") for m in others))
    if type(None) in options and literals:
        parts.append("null")
    return "; ".join(parts)


def unit_of(name: str, description: str = "") -> str:
    if name == "n_prb" or name.startswith("n_prb"):
        return "PRB"
    for suffix, unit in UNIT_SUFFIXES:
        if name.endswith(suffix):
            return unit
    match = UNIT_IN_DESCRIPTION.search(description or "")
    return match.group(1) if match else ""


def default_text(info: FieldInfo, path: str) -> str:
    if info.is_required():
        return "required"
    if info.default_factory is not None:
        try:
            value = info.default_factory()  # type: ignore[call-arg]
        except TypeError:
            return ""
    else:
        value = info.default
    if isinstance(value, BaseModel):
        return f"see `{path}`"
    return value_text(value)


# ------------------------------------------------------------------ sections
def model_sections(model: type[BaseModel], path: str = "", title: str = "", skip: frozenset[str] = frozenset(),
                   seen: set[type[BaseModel]] | None = None) -> list[Section]:
    """The model's own section, then one per nested model (depth first, in field order)."""
    seen = set() if seen is None else seen
    section = Section(path, model, title or (f"`{path}`" if path else "top level"), _intro(model))
    nested: list[tuple[str, type[BaseModel]]] = []
    for name, info in model.model_fields.items():
        if name in skip:
            continue
        sub = f"{path}.{name}" if path else name
        description = info.description or NOTES.get((model.__name__, name), "")
        if "{labs}" in description:
            description = description.replace("{labs}", ", ".join(embedded_lab_kinds()))
        section.fields.append(FieldDoc(name, type_text(info.annotation, sub), unit_of(name, description),
                                       default_text(info, sub), allowed_text(info), description))
        nested += [item for item in nested_models(info.annotation, sub) if item[1] not in seen]
    out = [section]
    seen.add(model)
    for sub_path, sub_model in nested:
        if sub_model not in seen:
            out += model_sections(sub_model, sub_path, seen=seen)
    return out


def _intro(model: type[BaseModel]) -> str:
    doc = model.__doc__ or ""
    if not doc or doc.startswith(("A base class", "Usage docs")) or model.__doc__ == BaseModel.__doc__:
        return ""
    return " ".join(doc.split())


def campaign_sections() -> list[Section]:
    from cellab.campaign.model import Campaign

    sections = model_sections(Campaign)
    sections[0].intro = ("A campaign file: what to vary, how often, in which order, with which workload, on which "
                         "lab. `factors`, `fixed` and bundle levels take run parameters (below).")
    return sections


def run_param_sections() -> list[Section]:
    """The parameters every lab understands (`fixed`, `factors`, bundle levels), and a UE of `ues`."""
    from cellab.campaign.model import TransportParams

    sections = model_sections(TransportParams, "", "every lab")
    sections[0].intro = ("Names under `fixed`, `factors` and a bundle's levels. " + sections[0].intro).strip()
    for section in sections[1:]:
        section.title = "`ues[]`: one UE of a run"
    return sections


def lab_sections(kind: str, shown: dict[type[BaseModel], str] | None = None) -> list[Section]:
    """One lab's own run parameters: an embedded lab kind, `inventory` (any lab inventory), or LAB.yaml.
    `shown`: params model -> lab kind already printed (a lab that shares its model points there)."""
    if kind == "inventory":
        return [_inventory_params_section()]
    if kind.endswith((".yaml", ".yml")):
        from cellab.campaign.model import lab_params_model

        model = lab_params_model(str(Path(kind).resolve()), kind)
        if model is None:
            return [Section("", BaseModel, f"lab inventory `{kind}`", "no parameters of its own: it lists no eNB "
                            "and no UE behind an attenuator channel")]
        return model_sections(model, "", f"lab inventory `{kind}`")
    from cellab.labs import EMBEDDED_LABS, embedded_lab_class

    if kind not in EMBEDDED_LABS:
        raise CellabError(f"unknown lab kind {kind!r} (allowed: {', '.join([*EMBEDDED_LABS, 'inventory'])}, "
                          "or a lab inventory file LAB.yaml)")
    cls = embedded_lab_class(kind)
    if shown is not None and cls.params_model in shown:
        return [Section("", cls.params_model, f"lab `{kind}`", f"The parameters of lab `{shown[cls.params_model]}`.")]
    if shown is not None:
        shown[cls.params_model] = kind
    sections = model_sections(cls.params_model, "", f"lab `{kind}`", skip=frozenset(RUN_PARAMS_SET_ELSEWHERE))
    hidden = [f"`{k}` (set with `{v}`)" for k, v in RUN_PARAMS_SET_ELSEWHERE.items()
              if k in cls.params_model.model_fields]
    doc = " ".join((cls.__doc__ or "").split())
    sections[0].intro = " ".join(filter(None, [doc, sections[0].intro, "Not a campaign parameter: " + ", ".join(hidden)
                                               if hidden else ""]))
    return sections


def _inventory_params_section() -> Section:
    """A lab inventory's parameters: the eNB's radio parameters when it lists an eNB, the attenuation when a UE
    names an attenuator channel (cellab/inventory/lab.py; the limits are the box's)."""
    from types import SimpleNamespace

    from cellab.inventory.lab import inventory_params_model

    stand_in = SimpleNamespace(devices=SimpleNamespace(enb=[None]))  # any inventory that lists an eNB
    model = inventory_params_model(stand_in, None)  # type: ignore[arg-type]
    assert model is not None
    section = model_sections(model, "", "lab inventory (`lab: LAB.yaml`)")[0]
    section.intro = ("The eNB's radio parameters when the inventory lists an eNB (applied by the eNB agent; null: "
                     "the profile's value), and `attenuation_db` when a UE names an attenuator channel. "
                     "`cellab schema lab LAB.yaml` prints one inventory's exact parameters and limits.")
    section.fields.append(FieldDoc("attenuation_db", "number or null", "dB", "null",
                                   "the box's min_db ≤ value ≤ max_db", INVENTORY_ATTENUATION_NOTE))
    return section


def inventory_sections() -> list[Section]:
    from cellab.inventory.model import Inventory

    sections = model_sections(Inventory)
    sections[0].intro = ("A lab inventory: where the controller binds, the hosts, the agents on them and the devices "
                         "each agent drives. Key and profile paths are relative to the inventory file.")
    return sections


# ------------------------------------------------------------------ rendering
def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_sections(sections: list[Section], level: int = 3) -> str:
    lines: list[str] = []
    for section in sections:
        lines += [f"{'#' * level} {section.title}", ""]
        if section.intro:
            lines += [section.intro, ""]
        if section.fields:
            lines += ["| field | type | unit | default | allowed | description |", "|---|---|---|---|---|---|"]
            lines += [f"| `{f.name}` | {_cell(f.type)} | {_cell(f.unit)} | {_cell(f.default)} | {_cell(f.allowed)} | "
                      f"{_cell(f.description)} |" for f in section.fields]
            lines.append("")
    return "\n".join(lines)


HEADER = f"""# Campaign and lab reference

Generated by `cellab schema` from the models that validate these files (`cellab/campaign/model.py`,
`cellab/inventory/model.py` and each lab's parameter model); do not edit by hand: regenerate with
`{REGENERATE}`. `cellab schema campaign`, `cellab schema inventory` and `cellab schema lab KIND`
print one part; `cellab schema lab LAB.yaml` the parameters of one lab inventory.

Units come from the field names: `_ms` milliseconds, `_s` seconds, `_db` dB, `_dbm` dBm, `_bytes` bytes,
`_mbit` Mbit/s, `_kbps` kbit/s, `_hz` Hz, `n_prb` physical resource blocks. A path is relative to the file
that names it. An unknown key is refused with the allowed keys and the closest one.
"""


def render(topic: str = "all", kind: str | None = None) -> str:
    """Markdown for one topic: all (docs/campaign.md), campaign, inventory, lab [KIND]."""
    if topic not in TOPICS:
        raise CellabError(f"unknown schema topic {topic!r} (allowed: {', '.join(TOPICS)})")
    if kind is not None and topic != "lab":
        raise CellabError(f"a lab kind goes with `cellab schema lab KIND`, not with {topic!r}")
    parts: list[str] = []
    if topic in ("all", "campaign"):
        parts += ["## Campaign file", "", render_sections(campaign_sections())]
    if topic in ("all", "campaign", "lab"):
        kinds = [] if topic == "campaign" else [kind] if kind else [*embedded_lab_kinds(), "inventory"]
        parts += ["## Run parameters", "",
                  "Set under `fixed`, listed under `factors`, or set together by a bundle factor's levels. Every "
                  "lab takes the first table; each lab adds its own"
                  + (" (`cellab schema lab KIND`)." if topic == "campaign" else "."), "",
                  render_sections(run_param_sections())]
        shown: dict[type[BaseModel], str] = {}
        for k in kinds:
            parts.append(render_sections(lab_sections(k, shown)))
    if topic in ("all", "inventory"):
        parts += ["## Lab inventory", "", render_sections(inventory_sections())]
    body = "\n".join(parts).rstrip() + "\n"
    return (HEADER + "\n" + body) if topic == "all" else body
