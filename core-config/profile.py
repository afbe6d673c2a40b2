"""A core (EPC) profile: what a lab user writes once and renders for any flavour.

PLMN, TAC list, APNs, UE subnet, DNS, the S1-MME and S1-U addresses the eNB dials (usually routable: the
eNB sits on another host), the MME's name, group and code, and the subscriber database. The internal
addresses between the daemons keep each flavour's loopback defaults (../shared/specs/anchors.md §2)."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from typing import Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from cellab.contracts.base import Model
from cellab.contracts.identity import NetworkIdentity
from cellab.errors import InputError, from_validation_error
from cellab.inputs import read_yaml

Flavour = Literal["open5gs", "open5gs-2.6", "nextepc", "srsepc"]
FLAVOURS: tuple[str, ...] = ("open5gs", "open5gs-2.6", "nextepc", "srsepc")
CIPHERING = Literal["EEA0", "EEA1", "EEA2"]
INTEGRITY = Literal["EIA0", "EIA1", "EIA2"]


class Plmn(Model):
    mcc: str = Field(pattern=r"^\d{3}$", description="3 digits, e.g. '001'")
    mnc: str = Field(pattern=r"^\d{2,3}$", description="2 or 3 digits, e.g. '01'")


class Mme(Model):
    name: str = Field("cellab-mme0", pattern=r"^[A-Za-z0-9._-]{1,64}$")
    group_id: int = Field(2, ge=0, le=65535, description="MME group id (GUMMEI)")
    code: int = Field(1, ge=0, le=255, description="MME code (GUMMEI)")
    s1ap_addr: str = Field("127.0.0.2", description="S1-MME address the eNB dials (its mme_addr)")
    network_name: str = Field("cellab", min_length=1, max_length=32)
    integrity_order: list[INTEGRITY] = Field(default_factory=lambda: ["EIA2", "EIA1", "EIA0"], min_length=1)
    ciphering_order: list[CIPHERING] = Field(default_factory=lambda: ["EEA0", "EEA1", "EEA2"], min_length=1)

    @field_validator("s1ap_addr")
    @classmethod
    def _ip(cls, value: str) -> str:
        return _check_ip(value)


class Apn(Model):
    name: str = Field(pattern=r"^[A-Za-z0-9][A-Za-z0-9.-]{0,62}$")
    qci: int = Field(9, ge=1, le=9)
    arp_priority: int = Field(8, ge=1, le=15)
    ambr_downlink_kbps: int = Field(1_000_000, ge=1)
    ambr_uplink_kbps: int = Field(1_000_000, ge=1)


class CoreProfile(Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    flavour: Flavour = "open5gs"
    plmn: Plmn
    tacs: list[int] = Field(min_length=1, description="tracking area codes served (16-bit)")
    mme: Mme = Field(default_factory=Mme)
    gtpu_addr: str = Field("127.0.0.6", description="S1-U address the eNB sends GTP-U to (SGW-U)")
    apns: list[Apn] = Field(default_factory=lambda: [Apn(name="internet")], min_length=1)
    ue_subnet: str = Field("10.45.0.0/16", description="IPv4 pool of the UEs; the gateway is its first address")
    dns: list[str] = Field(default_factory=lambda: ["8.8.8.8", "8.8.4.4"])
    mtu: int = Field(1400, ge=576, le=9000)
    db_uri: str = Field("mongodb://127.0.0.1:27017/open5gs", pattern=r"^mongodb(\+srv)?://")
    log_dir: str = Field("/var/log/cellab-core", description="where the daemons write their logs")

    @field_validator("tacs")
    @classmethod
    def _tacs(cls, value: list[int]) -> list[int]:
        bad = [t for t in value if not 0 <= t <= 65535]
        if bad:
            raise ValueError(f"TAC {bad[0]} is outside 0..65535")
        if len(set(value)) != len(value):
            raise ValueError("TACs must be distinct")
        return value

    @field_validator("gtpu_addr")
    @classmethod
    def _gtpu(cls, value: str) -> str:
        return _check_ip(value)

    @field_validator("dns")
    @classmethod
    def _dns(cls, value: list[str]) -> list[str]:
        return [_check_ip(v) for v in value]

    @field_validator("ue_subnet")
    @classmethod
    def _subnet(cls, value: str) -> str:
        try:
            net = ipaddress.IPv4Network(value, strict=True)
        except ValueError as exc:
            raise ValueError(f"not an IPv4 network like 10.45.0.0/16: {exc}") from None
        if net.prefixlen > 30:
            raise ValueError("the UE subnet needs room for a gateway and UEs (prefix /30 or shorter)")
        return value

    @model_validator(mode="after")
    def _apns_distinct(self) -> CoreProfile:
        names = [a.name for a in self.apns]
        if len(set(names)) != len(names):
            raise ValueError("apns: names must be distinct")
        return self

    @property
    def gateway(self) -> str:
        """The UE subnet's first address: the PGW/UPF side of the tunnel (srsEPC's sgi_if_addr)."""
        return str(next(ipaddress.IPv4Network(self.ue_subnet).hosts()))

    @property
    def ue_prefix_len(self) -> int:
        return ipaddress.IPv4Network(self.ue_subnet).prefixlen


def _check_ip(value: str) -> str:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"{value!r} is not an IP address") from None
    return value


def load_profile(path: str | Path) -> CoreProfile:
    """Read and validate a profile; every bad field is named with the file."""
    path = Path(path)
    data = read_yaml(path)
    if not isinstance(data, dict):
        raise InputError(path, "", "a core profile is a YAML mapping (name, plmn, tacs, mme, ...)")
    try:
        return CoreProfile.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(path, exc) from None


def network_identity(path: str | Path) -> NetworkIdentity:
    """What the eNB must agree with (entry point `cellab.identity:core`)."""
    profile = load_profile(path)
    return NetworkIdentity(source=str(path), mcc=profile.plmn.mcc, mnc=profile.plmn.mnc, tacs=list(profile.tacs),
                           mme_addrs=[profile.mme.s1ap_addr],
                           fields={"mcc": "plmn.mcc", "mnc": "plmn.mnc", "tac": "tacs", "mme": "mme.s1ap_addr"})
