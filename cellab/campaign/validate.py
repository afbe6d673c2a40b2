"""`cellab validate FILE` for every file a lab user writes: what it is is told from its contents, then it is
checked as the command that reads it will (campaigns and inventories are the CLI's own; the rest here)."""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from cellab.errors import InputError
from cellab.inputs import read_text, read_yaml

KINDS = ("campaign", "lab inventory", "core profile", "eNB profile", "attenuation schedule", "drive log",
         "calibration", "subscriber file", "Mahimahi trace")


def kind_of(path: Path) -> str:
    """What the file is, from its name and contents (InputError when nothing fits, listing the kinds)."""
    suffix = path.suffix.lower()
    if suffix in (".down", ".up"):
        return "Mahimahi trace"
    if suffix == ".json":
        return "calibration"
    if suffix == ".jsonl":
        return "drive log"
    if suffix == ".csv":
        header = next(csv.reader(io.StringIO(_first_row(path))), [])
        names = {h.strip().lower() for h in header}
        if "imsi" in names:
            return "subscriber file"
        if any("rsrp" in n for n in names):
            return "drive log"
        if any("atten" in n or n == "db" for n in names):
            return "attenuation schedule"
        raise InputError(path, "", f"a CSV whose header ({', '.join(header) or 'none'}) is no file cellab reads",
                         ["subscriber file (imsi, k, opc, ...)", "drive log (t_s, rsrp_dbm)", "schedule (t_s, ...)"])
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "", "not a YAML mapping", list(KINDS))
    keys = set(data)
    if "controller" in keys and "factors" not in keys:
        return "lab inventory"
    if {"flavour", "plmn"} <= keys:
        return "core profile"
    if "cells" in keys and keys & {"enb", "rf"}:
        return "eNB profile"
    if keys & {"points", "channels", "segments"} and not keys & {"factors", "workload"}:
        return "attenuation schedule"
    return "campaign"


def _first_row(path: Path) -> str:
    for line in read_text(path).splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            return line
    return ""


def check_file(path: Path, kind: str) -> str:
    """Check a file of one of the kinds the rooms read; returns a one-line summary."""
    from cellab.contracts.attenuator import planning
    from cellab.contracts.identity import load_identity
    from cellab.contracts.registry import load

    if kind == "core profile":
        ident: Any = load_identity("core", path)
        return f"core profile: PLMN {ident.mcc}{ident.mnc}, TACs {ident.tacs}, MME {', '.join(ident.mme_addrs)}"
    if kind == "eNB profile":
        ident = load_identity("enb", path)
        return f"eNB profile: PLMN {ident.mcc}{ident.mnc}, TACs {ident.tacs}, MME {', '.join(ident.mme_addrs)}"
    if kind == "attenuation schedule":
        points = planning().schedule_points(read_text(path), path.suffix.lower() == ".csv", str(path))
        return f"attenuation schedule: {len(points)} points"
    if kind == "drive log":
        planning().check_drive_log(str(path))
        return "drive log: readable, every row a number or an empty cell"
    if kind == "calibration":
        planning().check_calibration_file(str(path))
        return "calibration: readable and monotonic"
    if kind == "subscriber file":
        count = load("cellab.services", "subscribers", "subscriber file check")(path)
        return f"subscriber file: {count} subscribers (checked against a core profile in `cellab validate lab.yaml`)"
    if kind == "Mahimahi trace":
        from cellab.campaign.traces import read_mahimahi

        return f"Mahimahi trace: {len(read_mahimahi(path))} delivery opportunities"
    raise InputError(path, "", f"{kind!r} is no kind cellab validates", list(KINDS))
