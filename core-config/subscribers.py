"""Subscribers: a person's CSV or YAML file, validated whole, as Open5GS / NextEPC documents or srsEPC CSV.

K and OPc (or OP) are secrets: they appear only in the database documents and in an exported user_db.csv,
never in listings, logs or error messages (`mask`)."""

from __future__ import annotations

import csv
import io
import ipaddress
from pathlib import Path
from typing import Any

import yaml
from bson import Int64
from pydantic import Field, ValidationError, ValidationInfo, field_validator, model_validator

from cellab.contracts.base import Model
from cellab.errors import InputError, InputErrors

SRSEPC_CSV_HEADER = ("# srsEPC user_db.csv written by cellab\n"
                     "# Name,Auth,IMSI,Key,OP_Type,OP/OPc,AMF,SQN,QCI,IP_alloc\n")
AMBR_UNIT_KBPS = 1  # Open5GS ambr unit: 0 bps, 1 Kbps, 2 Mbps, 3 Gbps, 4 Tbps
SQN_MAX = (1 << 48) - 1  # SQN is 48 bits (TS 33.102)
FIELDS = ("name", "imsi", "k", "opc", "op", "amf", "apn", "static_ip", "ambr_downlink_kbps", "ambr_uplink_kbps",
          "sqn", "qci")


def mask(secret: str | None) -> str:
    """A secret as it may be shown: its last 4 hex digits only."""
    if not secret:
        return "-"
    return "*" * 4 + secret[-4:].lower()


def _hex(value: str, digits: int, what: str) -> str:
    value = value.strip().lower()
    if len(value) != digits or any(c not in "0123456789abcdef" for c in value):
        # never echo the value: it may be a secret
        raise ValueError(f"{what} must be {digits} hex digits")
    return value


# field -> (hex digits, the name an error uses)
HEX_FIELDS = {"k": (32, "K"), "opc": (32, "OPc"), "op": (32, "OP"), "amf": (4, "AMF")}


class Subscriber(Model):
    name: str = Field("", max_length=64, pattern=r"^[A-Za-z0-9_.-]*$")
    imsi: str
    k: str
    opc: str | None = None
    op: str | None = None
    amf: str = "8000"
    apn: str = Field("internet", pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$")
    static_ip: str | None = None
    ambr_downlink_kbps: int = Field(1_000_000, ge=1)
    ambr_uplink_kbps: int = Field(1_000_000, ge=1)
    sqn: int = Field(0, ge=0, le=SQN_MAX)
    qci: int = Field(9, ge=1, le=9)

    @field_validator("imsi")
    @classmethod
    def _imsi(cls, value: str) -> str:
        value = value.strip()
        if len(value) != 15 or not value.isdigit():
            raise ValueError("IMSI must be 15 digits")
        return value

    @field_validator("k", "opc", "op", "amf")
    @classmethod
    def _hex_fields(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or (not value and info.field_name in ("opc", "op")):
            return None  # OPc or OP: one of them is given
        digits, what = HEX_FIELDS[info.field_name]
        return _hex(value, digits, what)

    @field_validator("static_ip")
    @classmethod
    def _ip(cls, value: str | None) -> str | None:
        if not value or value == "dynamic":
            return None
        try:
            return str(ipaddress.IPv4Address(value))
        except ValueError:
            raise ValueError("static_ip must be an IPv4 address or 'dynamic'") from None

    @model_validator(mode="after")
    def _one_operator_key(self) -> Subscriber:
        if (self.opc is None) == (self.op is None):
            raise ValueError("give exactly one of opc and op")
        return self

    def masked(self) -> dict[str, Any]:
        row = self.model_dump()
        row["k"], row["opc"], row["op"] = mask(self.k), mask(self.opc) if self.opc else None, \
            mask(self.op) if self.op else None
        return row


def _rows(path: Path) -> list[dict[str, Any]]:
    try:
        text = path.read_text()
    except OSError as exc:
        raise InputError(path, "", f"cannot read: {exc.strerror}") from None
    if path.suffix.lower() in (".yaml", ".yml"):
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise InputError(path, "", f"bad YAML: {getattr(exc, 'problem', exc)}") from None
        if isinstance(data, dict):
            data = data.get("subscribers")
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise InputError(path, "subscribers", "a list of mappings (imsi, k, opc, ...) is expected")
        return data
    lines = [line for line in text.splitlines() if line.strip() and not line.lstrip().startswith("#")]
    reader = csv.DictReader(lines, skipinitialspace=True)
    unknown = [f for f in (reader.fieldnames or []) if f not in FIELDS]
    if not reader.fieldnames or "imsi" not in reader.fieldnames or unknown:
        raise InputError(path, "header", f"unknown or missing columns {unknown or ['imsi']}", allowed=FIELDS)
    return [{k: v for k, v in row.items() if v not in (None, "")} for row in reader]


def load_subscribers(path: str | Path, plmn: str | None = None) -> list[Subscriber]:
    """Every row validated before anything is used; the error names every bad row and field.
    `plmn` (MCC+MNC digits): each IMSI must start with it."""
    path = Path(path)
    errors: list[InputError] = []
    subscribers: list[Subscriber] = []
    seen: dict[str, int] = {}
    for index, row in enumerate(_rows(path), start=1):
        where = f"row {index}"
        try:
            sub = Subscriber.model_validate(row)
        except ValidationError as exc:
            for err in exc.errors():
                field = ".".join(str(p) for p in err["loc"]) or "row"
                msg = err["msg"].removeprefix("Value error, ")
                errors.append(InputError(path, f"{where}.{field}", msg))
            continue
        if plmn and not sub.imsi.startswith(plmn):
            errors.append(InputError(path, f"{where}.imsi", f"IMSI does not start with the PLMN {plmn}"))
        if sub.imsi in seen:
            errors.append(InputError(path, f"{where}.imsi", f"IMSI {sub.imsi} repeats row {seen[sub.imsi]}"))
        seen.setdefault(sub.imsi, index)
        subscribers.append(sub)
    if errors:
        raise InputErrors(errors)
    if not subscribers:
        raise InputError(path, "", "no subscribers in the file")
    return subscribers


def _qos_arp(priority: int = 8) -> dict[str, int]:
    return {"priority_level": priority, "pre_emption_capability": 1, "pre_emption_vulnerability": 2}


def open5gs_document(sub: Subscriber) -> dict[str, Any]:
    """schema_version 1 as open5gs-dbctl writes it, SQN as a 64-bit integer."""
    ambr = {"downlink": {"value": sub.ambr_downlink_kbps, "unit": AMBR_UNIT_KBPS},
            "uplink": {"value": sub.ambr_uplink_kbps, "unit": AMBR_UNIT_KBPS}}
    session: dict[str, Any] = {"name": sub.apn, "type": 3, "qos": {"index": sub.qci, "arp": _qos_arp()},
                               "ambr": ambr, "pcc_rule": []}
    if sub.static_ip:
        session["ue"] = {"addr": sub.static_ip}
    return {
        "schema_version": 1, "imsi": sub.imsi, "msisdn": [], "imeisv": [], "mme_host": [], "mm_realm": [],
        "purge_flag": [],
        "security": {"k": sub.k, "op": sub.op, "opc": sub.opc, "amf": sub.amf, "sqn": Int64(sub.sqn)},
        "ambr": ambr,
        "slice": [{"sst": 1, "default_indicator": True, "session": [session]}],
        "access_restriction_data": 32, "network_access_mode": 0, "subscriber_status": 0,
        "operator_determined_barring": 0, "subscribed_rau_tau_timer": 12, "__v": 0,
    }


def nextepc_document(sub: Subscriber) -> dict[str, Any]:
    """The pre-slice `pdn[]` schema of NextEPC's web UI; its HSS reads AMBR as 64-bit Kbps."""
    ambr = {"downlink": Int64(sub.ambr_downlink_kbps), "uplink": Int64(sub.ambr_uplink_kbps)}
    pdn: dict[str, Any] = {"apn": sub.apn, "type": 2, "qos": {"qci": sub.qci, "arp": _qos_arp()}, "ambr": ambr,
                           "pcc_rule": []}
    if sub.static_ip:
        pdn["ue"] = {"addr": sub.static_ip}
    return {
        "imsi": sub.imsi,
        "security": {"k": sub.k, "op": sub.op, "opc": sub.opc, "amf": sub.amf, "sqn": Int64(sub.sqn)},
        "access_restriction_data": 32, "subscriber_status": 0, "network_access_mode": 2,
        "subscribed_rau_tau_timer": 12, "ambr": ambr, "pdn": [pdn], "__v": 0,
    }


def document(sub: Subscriber, flavour: str) -> dict[str, Any]:
    return nextepc_document(sub) if flavour == "nextepc" else open5gs_document(sub)


def from_document(doc: dict[str, Any]) -> Subscriber:
    """A stored document (either schema) back to a subscriber, e.g. for export."""
    sec = doc.get("security") or {}
    if "pdn" in doc:
        pdn = (doc.get("pdn") or [{}])[0]
        apn, qci = pdn.get("apn", "internet"), (pdn.get("qos") or {}).get("qci", 9)
        ip = (pdn.get("ue") or {}).get("addr")
        dl, ul = (doc.get("ambr") or {}).get("downlink", 1_000_000), (doc.get("ambr") or {}).get("uplink", 1_000_000)
    else:
        session = ((doc.get("slice") or [{}])[0].get("session") or [{}])[0]
        apn, qci = session.get("name", "internet"), (session.get("qos") or {}).get("index", 9)
        ip = (session.get("ue") or {}).get("addr")
        ambr = doc.get("ambr") or {}
        dl = _kbps(ambr.get("downlink")) or 1_000_000
        ul = _kbps(ambr.get("uplink")) or 1_000_000
    return Subscriber(imsi=doc["imsi"], k=sec["k"], opc=sec.get("opc"), op=None if sec.get("opc") else sec.get("op"),
                      amf=sec.get("amf", "8000"), apn=apn, static_ip=ip, sqn=int(sec.get("sqn") or 0), qci=qci,
                      ambr_downlink_kbps=int(dl), ambr_uplink_kbps=int(ul))


def _kbps(ambr: dict | None) -> int | None:
    if not ambr:
        return None
    return int(ambr.get("value", 0) * 1000 ** (ambr.get("unit", 1) - 1)) or None


def srsepc_csv(subscribers: list[Subscriber]) -> str:
    """srsEPC user_db.csv: Name,Auth,IMSI,Key,OP_Type,OP/OPc,AMF,SQN,QCI,IP_alloc (milenage, SQN 12 hex)."""
    out = io.StringIO()
    out.write(SRSEPC_CSV_HEADER)
    for n, sub in enumerate(subscribers, start=1):
        op_type, op = ("opc", sub.opc) if sub.opc else ("op", sub.op)
        out.write(",".join([sub.name or f"ue{n}", "mil", sub.imsi, sub.k, op_type, op or "", sub.amf,
                            f"{sub.sqn:012x}", str(sub.qci), sub.static_ip or "dynamic"]) + "\n")
    return out.getvalue()
