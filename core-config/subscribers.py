"""Subscribers: a person's CSV or YAML file, validated whole, as Open5GS / NextEPC documents or srsEPC CSV.

K and OPc (or OP) are secrets: they appear only in the database documents and in an exported user_db.csv,
never in listings, logs or error messages (`mask`; the model hides inputs from its validation errors, and a
stored document that does not validate is reported by IMSI and field, never by value)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import BeforeValidator, ConfigDict, Field, ValidationError, ValidationInfo, field_validator, model_validator

from cellab.contracts.base import Model
from cellab.errors import InputError, InputErrors
from cellab.inputs import (check_hex, check_imsi, check_ip, csv_dicts, csv_rows, decode_text, parse_yaml,
                           read_bytes, text_problem)

if TYPE_CHECKING:
    from .profile import CoreProfile

SRSEPC_CSV_HEADER = ("# srsEPC user_db.csv written by cellab\n"
                     "# Name,Auth,IMSI,Key,OP_Type,OP/OPc,AMF,SQN,QCI,IP_alloc\n")
AMBR_UNIT_KBPS = 1  # Open5GS ambr unit: 0 bps, 1 Kbps, 2 Mbps, 3 Gbps, 4 Tbps
# Extended-APN-AMBR-UL/DL are Unsigned32 in kbps (TS 29.272 §7.3.x): the most an HSS can hand an MME
AMBR_MAX_KBPS = (1 << 32) - 1
SQN_MAX = (1 << 48) - 1  # SQN is 48 bits (TS 33.102)
# the default bearer's QCI must be non-GBR (TS 23.203 Table 6.1.7: 1-4 are GBR, 5-9 non-GBR)
NON_GBR_QCIS = range(5, 10)


def check_default_qci(value: Any) -> Any:
    """A GBR QCI named as such (before the range check, whose 'greater than or equal to 5' says no why)."""
    number = int(value) if isinstance(value, str) and value.strip().isascii() and value.strip().isdigit() else value
    if isinstance(number, int) and not isinstance(number, bool) and 1 <= number <= 4:  # a CSV cell is text
        raise ValueError(f"QCI {number} is a GBR QCI (1-4), which a default bearer cannot have "
                         "(allowed: the non-GBR QCIs 5..9, TS 23.203 Table 6.1.7)")
    return value


#: the QCI of a default bearer: a subscriber's and a core profile APN's
DefaultQci = Annotated[int, BeforeValidator(check_default_qci), Field(ge=min(NON_GBR_QCIS), le=max(NON_GBR_QCIS))]
# APN network identifier (TS 23.003 §9.1): dot-separated labels of letters, digits and inner hyphens
APN_PATTERN = r"^[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*$"
FIELDS = ("name", "imsi", "k", "opc", "op", "amf", "apn", "static_ip", "ambr_downlink_kbps", "ambr_uplink_kbps",
          "sqn", "qci")
SECRET_FIELDS = ("k", "opc", "op")
FILE_MAX_BYTES = 16 << 20  # 100k subscribers in CSV take ~15 MB
MAX_ROWS = 100_000
MAX_ERRORS_SHOWN = 50


def mask(secret: str | None) -> str:
    """A secret as it may be shown: its last 4 hex digits only."""
    if not secret:
        return "-"
    return "*" * 4 + secret[-4:].lower()


# field -> (hex digits, the name an error uses)
HEX_FIELDS = {"k": (32, "K"), "opc": (32, "OPc"), "op": (32, "OP"), "amf": (4, "AMF")}


class Subscriber(Model):
    # a validation error must never carry K/OPc: pydantic would print them as `input_value=...`
    model_config = ConfigDict(extra="forbid", hide_input_in_errors=True)

    name: str = Field("", max_length=64, pattern=r"^([A-Za-z0-9][A-Za-z0-9_.-]*)?$")
    imsi: str
    k: str = Field(repr=False)  # kept out of repr(): a log line or a traceback's locals must not show it
    opc: str | None = Field(None, repr=False)
    op: str | None = Field(None, repr=False)
    amf: str = "8000"
    apn: str = Field("internet", max_length=63, pattern=APN_PATTERN)
    static_ip: str | None = None
    ambr_downlink_kbps: int = Field(1_000_000, ge=1, le=AMBR_MAX_KBPS)
    ambr_uplink_kbps: int = Field(1_000_000, ge=1, le=AMBR_MAX_KBPS)
    sqn: int = Field(0, ge=0, le=SQN_MAX)
    qci: DefaultQci = Field(9, description="the default bearer's QCI: non-GBR, 5..9 (TS 23.203 Table 6.1.7)")

    @field_validator("imsi", mode="before")
    @classmethod
    def _imsi(cls, value: Any) -> str:
        return check_imsi(value)

    @field_validator("k", "opc", "op", "amf", mode="before")
    @classmethod
    def _hex_fields(cls, value: Any, info: ValidationInfo) -> str | None:
        if value is None or (value == "" and info.field_name in ("opc", "op")):
            return None  # OPc or OP: one of them is given
        digits, what = HEX_FIELDS[info.field_name]
        return check_hex(value, digits, what)  # never echoes the value: it may be a secret

    @field_validator("static_ip", mode="before")
    @classmethod
    def _ip(cls, value: Any) -> str | None:
        if value is None or value == "" or value == "dynamic":
            return None
        try:
            return check_ip(value, version=4, what="static_ip")
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


def validation_problems(exc: ValidationError) -> list[tuple[str, str]]:
    """(field, message) of a subscriber's validation error, without the input values."""
    out = []
    for err in exc.errors(include_input=False, include_url=False):
        field = ".".join(str(p) for p in err["loc"]) or "row"
        out.append((field, err["msg"].removeprefix("Value error, ")))
    return out


def _looks_like_srsepc_user_db(cells: list[str]) -> bool:
    return len(cells) >= 10 and cells[1].strip() in ("mil", "xor") and cells[4].strip() in ("op", "opc")


def _rows(text: str, source: str | Path, yaml_format: bool) -> list[tuple[str, dict[str, Any]]]:
    """(where, row) of every subscriber row; `where` is "row N" (N counts data rows from 1)."""
    if yaml_format:
        data = parse_yaml(text, source)
        if isinstance(data, dict):
            data = data.get("subscribers")
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise InputError(source, "subscribers", "not a subscriber file: a YAML list of mappings (imsi, k, "
                             "opc, ...) is expected, alone or under `subscribers:`")
        return [(f"row {i}", r) for i, r in enumerate(data, start=1)]
    rows = csv_rows(text, source)
    if rows and _looks_like_srsepc_user_db(rows[0][1]):
        raise InputError(source, "header", "this is srsEPC's own user_db.csv (no header row): give cellab's "
                         "subscriber CSV, whose first row names the columns", allowed=FIELDS)
    if rows:
        header = [h.strip() for h in rows[0][1]]
        unknown = [h for h in header if h not in FIELDS]
        if unknown or "imsi" not in header:
            # never repeat the cells: a first row of data would be K and OPc
            shown = [h for h in unknown if h.isascii() and h.isidentifier() and len(h) <= 24]
            what = (f"unknown columns {shown}" if shown and len(shown) == len(unknown) else
                    f"{len(unknown)} unknown columns" if unknown else "no imsi column")
            raise InputError(source, "header", f"not a subscriber file: the first row must name the columns "
                             f"({what})", allowed=FIELDS)
    _, dict_rows = csv_dicts(text, source, required=("imsi",))
    return [(f"row {n}", {k: v for k, v in row.items() if v != ""})
            for n, (_line, row) in enumerate(dict_rows, start=1)]


def parse_subscribers(text: str, source: str | Path, plmn: str | None = None, profile: CoreProfile | None = None,
                      yaml_format: bool | None = None, flavour: str | None = None) -> list[Subscriber]:
    """Every row validated before anything is used; the error names every bad row and field, never a value
    of K, OPc or OP. `plmn` (MCC+MNC digits): each IMSI must start with it; `profile`: its PLMN, each static
    IP inside its UE pool (and not its gateway), and each APN served by it (for `flavour` srsepc only an APN
    the row sets: srsEPC's user_db.csv has no APN column, every UE gets epc.conf's one APN).
    `yaml_format` None: YAML unless the first line that is no comment names CSV columns."""
    if profile is not None:
        plmn = plmn or profile.plmn.mcc + profile.plmn.mnc
    if yaml_format is None:
        first = next((ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")), "")
        yaml_format = not ("," in first and ":" not in first)
    rows = _rows(text, source, yaml_format)
    if len(rows) > MAX_ROWS:
        raise InputError(source, "", f"{len(rows)} subscribers: more than {MAX_ROWS} in one file")
    errors: list[InputError] = []
    subscribers: list[Subscriber] = []
    seen: dict[str, str] = {}
    ips: dict[str, str] = {}
    for where, row in rows:
        try:
            sub = Subscriber.model_validate(row)
        except ValidationError as exc:
            errors += [InputError(source, f"{where}.{field}", msg) for field, msg in validation_problems(exc)]
            continue
        if plmn and not sub.imsi.startswith(plmn):
            errors.append(InputError(source, f"{where}.imsi", f"IMSI does not start with the PLMN {plmn}"))
        if sub.imsi in seen:
            errors.append(InputError(source, f"{where}.imsi", f"IMSI {sub.imsi} repeats {seen[sub.imsi]}"))
        seen.setdefault(sub.imsi, where)
        if sub.static_ip:
            if sub.static_ip in ips:
                errors.append(InputError(source, f"{where}.static_ip", f"{sub.static_ip} is also the static IP of "
                                         f"{ips[sub.static_ip]}: two UEs cannot share one address"))
            ips.setdefault(sub.static_ip, where)
        if profile is not None:
            errors += [InputError(source, f"{where}.{field}", msg, allowed)
                       for field, msg, allowed in profile_problems(sub, profile, flavour)]
        subscribers.append(sub)
    if errors:
        shown = errors[:MAX_ERRORS_SHOWN]
        if len(errors) > MAX_ERRORS_SHOWN:
            shown.append(InputError(source, "", f"... and {len(errors) - MAX_ERRORS_SHOWN} more problems"))
        raise InputErrors(shown)
    if not subscribers:
        raise InputError(source, "", "no subscribers in the file")
    return subscribers


def profile_problems(sub: Subscriber, profile: CoreProfile,
                     flavour: str | None = None) -> list[tuple[str, str, list[str] | None]]:
    """(field, message, allowed) where a subscriber does not fit the core profile that will serve it (run by
    `flavour`, default the profile's own)."""
    problems: list[tuple[str, str, list[str] | None]] = []
    apns = [a.name for a in profile.apns]
    if (flavour or profile.flavour) == "srsepc":
        # epc.conf's `apn` is the first (flavour_problems refuses more); a row without one gets it
        if "apn" in sub.model_fields_set and sub.apn.lower() != apns[0].lower():
            problems.append(("apn", f"APN {sub.apn} is not served by core profile {profile.name}: srsEPC gives "
                             f"every UE its one APN (epc.conf `apn`)", apns[:1]))
    elif sub.apn.lower() not in (a.lower() for a in apns):
        problems.append(("apn", f"APN {sub.apn} is not served by core profile {profile.name}", apns))
    if sub.static_ip:
        net = ipaddress.IPv4Network(profile.ue_subnet)
        addr = ipaddress.IPv4Address(sub.static_ip)
        first, last = net.network_address + 2, net.broadcast_address - 1  # .0 network, .1 gateway, broadcast
        if addr not in net:
            problems.append(("static_ip", f"{addr} is outside the profile's UE subnet {net}",
                             [f"{first} .. {last}"]))
        elif not first <= addr <= last:
            role = ("the subnet's own address" if addr == net.network_address else
                    "the UE gateway" if addr == net.network_address + 1 else "the broadcast address")
            problems.append(("static_ip", f"{addr} is {role} of {net}", [f"{first} .. {last}"]))
    return problems


def load_subscribers(path: str | Path, plmn: str | None = None, profile: CoreProfile | None = None,
                     flavour: str | None = None) -> list[Subscriber]:
    """A subscriber file (.yaml/.yml: YAML, else CSV with a header row): a regular file (a FIFO or device is
    refused without blocking) of at most FILE_MAX_BYTES, UTF-8, parsed with the input layer's guards."""
    path = Path(path)
    text = decode_text(read_bytes(path, FILE_MAX_BYTES), path)
    return parse_subscribers(text, path, plmn, profile, yaml_format=path.suffix.lower() in (".yaml", ".yml"),
                             flavour=flavour)


def _qos_arp(priority: int = 8) -> dict[str, int]:
    return {"priority_level": priority, "pre_emption_capability": 1, "pre_emption_vulnerability": 2}


def open5gs_document(sub: Subscriber) -> dict[str, Any]:
    """schema_version 1 as open5gs-dbctl writes it, SQN as a 64-bit integer."""
    from bson import Int64  # pymongo's bson, only to write documents: profiles load without it

    ambr = {"downlink": {"value": sub.ambr_downlink_kbps, "unit": AMBR_UNIT_KBPS},
            "uplink": {"value": sub.ambr_uplink_kbps, "unit": AMBR_UNIT_KBPS}}
    session: dict[str, Any] = {"name": sub.apn, "type": 3, "qos": {"index": sub.qci, "arp": _qos_arp()},
                               "ambr": ambr, "pcc_rule": []}
    if sub.static_ip:  # lib/dbi/subscription.c reads session.ue.ipv4 (OGS_IPV4_STRING)
        session["ue"] = {"ipv4": sub.static_ip}
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
    from bson import Int64  # pymongo's bson, only to write documents: profiles load without it

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


class StoredSubscriberError(ValueError):
    """A stored document that is no valid subscriber: names the IMSI (when it is one) and the fields, never a
    value of the document."""

    def __init__(self, imsi: str, problems: list[tuple[str, str]]):
        self.imsi, self.problems = imsi, problems
        super().__init__(f"stored subscriber {imsi}: " + "; ".join(f"{f}: {m}" for f, m in problems))


def _doc_imsi(doc: Any) -> str:
    imsi = doc.get("imsi") if isinstance(doc, dict) else None
    try:
        return check_imsi(imsi)
    except ValueError:
        return "(no valid IMSI)"


def from_document(doc: dict[str, Any]) -> Subscriber:
    """A stored document (either schema) back to a subscriber, e.g. for export; StoredSubscriberError when it
    is none (fields named, values never shown)."""
    imsi = _doc_imsi(doc)
    try:
        fields = _document_fields(doc)
    except (AttributeError, IndexError, KeyError, TypeError, ValueError, OverflowError):
        raise StoredSubscriberError(imsi, [("document", "not an Open5GS or NextEPC subscriber document")]) from None
    try:
        return Subscriber.model_validate(fields)
    except ValidationError as exc:
        raise StoredSubscriberError(imsi, [(_stored_field(f), m) for f, m in validation_problems(exc)]) from None


_STORED = {"k": "security.k", "opc": "security.opc", "op": "security.op", "amf": "security.amf",
           "sqn": "security.sqn"}


def _stored_field(field: str) -> str:
    return _STORED.get(field, field)


def _document_fields(doc: dict[str, Any]) -> dict[str, Any]:
    sec = doc.get("security") or {}
    if "pdn" in doc:
        pdn = (doc.get("pdn") or [{}])[0]
        apn, qci = pdn.get("apn", "internet"), (pdn.get("qos") or {}).get("qci", 9)
        ip = (pdn.get("ue") or {}).get("addr")
        dl, ul = (doc.get("ambr") or {}).get("downlink", 1_000_000), (doc.get("ambr") or {}).get("uplink", 1_000_000)
    else:
        session = ((doc.get("slice") or [{}])[0].get("session") or [{}])[0]
        apn, qci = session.get("name", "internet"), (session.get("qos") or {}).get("index", 9)
        ue = session.get("ue") or {}
        ip = ue.get("ipv4") or ue.get("addr")  # "addr": what cellab wrote before it followed Open5GS
        ambr = doc.get("ambr") or {}
        dl = _kbps(ambr.get("downlink")) or 1_000_000
        ul = _kbps(ambr.get("uplink")) or 1_000_000
    return {"imsi": doc.get("imsi"), "k": sec.get("k"), "opc": sec.get("opc"),
            "op": None if sec.get("opc") else sec.get("op"), "amf": sec.get("amf", "8000"), "apn": apn,
            "static_ip": ip, "sqn": int(sec.get("sqn") or 0), "qci": qci, "ambr_downlink_kbps": int(dl),
            "ambr_uplink_kbps": int(ul)}


def _kbps(ambr: dict | None) -> int | None:
    if not ambr:
        return None
    return int(ambr.get("value", 0) * 1000 ** (ambr.get("unit", 1) - 1)) or None


def srsepc_csv(subscribers: list[Subscriber]) -> str:
    """srsEPC user_db.csv: Name,Auth,IMSI,Key,OP_Type,OP/OPc,AMF,SQN,QCI,IP_alloc (milenage, SQN 12 hex).
    srsEPC splits lines on ',' and skips lines starting with '#': a cell that would break that is refused."""
    lines = [SRSEPC_CSV_HEADER]
    for n, sub in enumerate(subscribers, start=1):
        op_type, op = ("opc", sub.opc) if sub.opc else ("op", sub.op)
        cells = {"Name": sub.name or f"ue{n}", "Auth": "mil", "IMSI": sub.imsi, "Key": sub.k, "OP_Type": op_type,
                 "OP/OPc": op or "", "AMF": sub.amf, "SQN": f"{sub.sqn:012x}", "QCI": str(sub.qci),
                 "IP_alloc": sub.static_ip or "dynamic"}
        for column, cell in cells.items():
            problem = text_problem(cell, special=",#\"' ") or ("is empty" if not cell else None)
            if problem:
                secret = column in ("Key", "OP/OPc")
                raise InputError("user_db.csv", f"row {n}.{column}", f"{'the value' if secret else repr(cell)} "
                                 f"{problem}: srsEPC's user_db.csv cannot carry it",
                                 ["ASCII letters, digits, '.', '_', '-'"])
        lines.append(",".join(cells.values()) + "\n")
    return "".join(lines)


def check_subscribers_file(path: str | Path, profile_path: str | Path | None = None, flavour: str | None = None) -> int:
    """What `cellab validate lab.yaml` needs for a core's `subscribers:` file: the file read and validated
    against the core's profile as the core agent will (PLMN, UE subnet, APNs). Returns the count; raises InputError(s) naming the file, rows and fields (never K/OPc)."""
    from .profile import load_profile

    if profile_path is None:  # the file alone (`cellab validate subscribers.csv`): rows, fields, duplicates
        return len(load_subscribers(path))
    profile = load_profile(profile_path)
    chosen = flavour or profile.flavour
    return len(load_subscribers(path, profile=profile, flavour=chosen))
