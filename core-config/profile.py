"""A core (EPC) profile: what a lab user writes once and renders for any flavour.

PLMN, TAC list, APNs, UE subnet, DNS, the S1-MME and S1-U addresses the eNB dials (usually routable: the
eNB sits on another host), the MME's name, group and code, and the subscriber database. The internal
addresses between the daemons keep each flavour's loopback defaults (../shared/specs/anchors.md §2)."""

from __future__ import annotations

import ipaddress
import re
from pathlib import Path
from typing import Annotated, Literal

from pydantic import AfterValidator, Field, ValidationError, field_validator, model_validator

from cellab.contracts.base import Model
from cellab.contracts.identity import NetworkIdentity
from cellab.errors import InputError, from_validation_error
from cellab.inputs import check_ip, read_yaml

from .subscribers import AMBR_MAX_KBPS, APN_PATTERN, DefaultQci

Flavour = Literal["open5gs", "open5gs-2.6", "nextepc", "srsepc"]
FLAVOURS: tuple[str, ...] = ("open5gs", "open5gs-2.6", "nextepc", "srsepc")
CIPHERING = Literal["EEA0", "EEA1", "EEA2"]
INTEGRITY = Literal["EIA0", "EIA1", "EIA2"]


# Every string of a profile reaches a rendered file (YAML, srsEPC's INI): each has a grammar, and none admits a
# line break, a quote, '#', or a character that is not printable ASCII. Patterns are matched by pydantic's
# Rust engine, where `$` is the end of the text and `[0-9]`/`[A-Za-z]` are ASCII only (`\d` would take any
# Unicode digit).
NETWORK_NAME = r"^[A-Za-z0-9._-]([A-Za-z0-9 ._-]{0,30}[A-Za-z0-9._-])?$"
NETWORK_NAME_FORM = "1..32 of ASCII letters, digits, '.', '_', '-' and inner spaces"
# mongodb[+srv]://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]...][/[DATABASE]][?OPTIONS]; anything else
# percent-encoded (RFC 3986), as the MongoDB URI format wants
_CRED = r"[A-Za-z0-9._~%+-]+"
DB_URI = re.compile(
    rf"mongodb(?:\+srv)?://(?:{_CRED}(?::{_CRED})?@)?(?P<hosts>[^/?@]+)"
    r"(?:/(?P<db>[A-Za-z0-9_-]{0,63})(?:\?[A-Za-z0-9._~%=&+-]*)?)?")
DB_HOST = re.compile(r"(?:[A-Za-z0-9](?:[A-Za-z0-9.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])(?::(?P<port>[0-9]{1,5}))?")
DB_URI_FORM = "mongodb://[USER[:PASSWORD]@]HOST[:PORT][,HOST[:PORT]]/[DATABASE][?OPTIONS] (others %-encoded)"
LOG_DIR_COMPONENT = re.compile(r"[A-Za-z0-9_.-]{1,64}")
LOG_DIR_FORM = "an absolute path of ASCII letters, digits, '_', '.', '-' (no '..'), outside the system folders"
# where a daemon running as root must not be told to write its logs
SYSTEM_DIRS = ("/bin", "/boot", "/dev", "/etc", "/lib", "/lib32", "/lib64", "/proc", "/run", "/sbin", "/sys", "/usr")
SYSTEM_DIRS_ALLOWED = ("/usr/local/var",)  # Open5GS's own default log folder when built with prefix /usr/local


class Plmn(Model):
    mcc: str = Field(pattern=r"^[0-9]{3}$", description="3 ASCII digits, e.g. '001'")
    mnc: str = Field(pattern=r"^[0-9]{2,3}$", description="2 or 3 ASCII digits, e.g. '01'")


class Mme(Model):
    name: str = Field("cellab-mme0", pattern=r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$", description="S1AP MMEname")
    group_id: int = Field(2, ge=0, le=65535, description="MME group id (GUMMEI)")
    code: int = Field(1, ge=0, le=255, description="MME code (GUMMEI)")
    s1ap_addr: str = Field("127.0.0.2", description="S1-MME address the eNB dials (its mme_addr)")
    network_name: str = Field("cellab", pattern=NETWORK_NAME, description=NETWORK_NAME_FORM)
    integrity_order: list[INTEGRITY] = Field(default_factory=lambda: ["EIA2", "EIA1", "EIA0"], min_length=1)
    ciphering_order: list[CIPHERING] = Field(default_factory=lambda: ["EEA0", "EEA1", "EEA2"], min_length=1)

    @field_validator("s1ap_addr")
    @classmethod
    def _ip(cls, value: str) -> str:
        return check_ip(value, what="s1ap_addr")


class Apn(Model):
    name: str = Field(pattern=APN_PATTERN, max_length=63, description="APN network identifier (TS 23.003 §9.1)")
    qci: DefaultQci = Field(9, description="the default bearer's QCI: non-GBR, 5..9 (TS 23.203 Table 6.1.7)")
    arp_priority: int = Field(8, ge=1, le=15)
    ambr_downlink_kbps: int = Field(1_000_000, ge=1, le=AMBR_MAX_KBPS)
    ambr_uplink_kbps: int = Field(1_000_000, ge=1, le=AMBR_MAX_KBPS)


class CoreProfile(Model):
    name: str = Field(pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    flavour: Flavour = "open5gs"
    plmn: Plmn
    tacs: list[int] = Field(min_length=1, description="tracking area codes served (16-bit)")
    mme: Mme = Field(default_factory=Mme)
    gtpu_addr: str = Field("127.0.0.6", description="S1-U address the eNB sends GTP-U to (SGW-U)")
    apns: list[Apn] = Field(default_factory=lambda: [Apn(name="internet")], min_length=1)
    ue_subnet: str = Field("10.45.0.0/16", description="IPv4 pool of the UEs; the gateway is its first address")
    dns: list[Annotated[str, AfterValidator(lambda v: check_ip(v, what="DNS server"))]] = Field(
        default_factory=lambda: ["8.8.8.8", "8.8.4.4"])
    mtu: int = Field(1400, ge=576, le=9000)
    db_uri: str = Field("mongodb://127.0.0.1:27017/open5gs", max_length=512, description=DB_URI_FORM)
    log_dir: str = Field("/var/log/cellab-core", max_length=256, description="where the daemons write their logs: "
                         + LOG_DIR_FORM)
    db_local: bool = Field(False, description="Open5GS/NextEPC: the core agent runs its own FerretDB "
                           "(cellab-ferretdb) at db_uri (one loopback host:port) for each run, data in the run "
                           "folder, and provisions the run's subscribers into it")

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
        return check_ip(value, what="gtpu_addr")

    @field_validator("db_uri")
    @classmethod
    def _db_uri(cls, value: str) -> str:
        return check_db_uri(value)

    @field_validator("log_dir")
    @classmethod
    def _log_dir(cls, value: str) -> str:
        return check_log_dir(value)

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
        names = [a.name.lower() for a in self.apns]  # APNs are case-insensitive (TS 23.003 §9.1)
        if len(set(names)) != len(names):
            raise ValueError("apns: names must be distinct")
        return self

    @model_validator(mode="after")
    def _addresses_outside_the_ue_pool(self) -> CoreProfile:
        # the UE subnet is routed into the tunnel device: an S1 address inside it (the gateway above all, which
        # the PGW/UPF/SPGW takes for itself) would be unreachable from the eNB or taken twice
        net = ipaddress.IPv4Network(self.ue_subnet)
        for field, value in (("gtpu_addr", self.gtpu_addr), ("mme.s1ap_addr", self.mme.s1ap_addr)):
            addr = ipaddress.ip_address(value)
            if addr == ipaddress.ip_address(self.gateway):
                raise ValueError(f"{field}: {value} is the UE gateway of ue_subnet {self.ue_subnet}: the S1 side "
                                 "needs an address outside the UE pool")
            if addr in net:
                raise ValueError(f"{field}: {value} is inside ue_subnet {self.ue_subnet}: the S1 side needs an "
                                 "address outside the UE pool")
        return self

    @model_validator(mode="after")
    def _local_db_on_loopback(self) -> CoreProfile:
        if self.db_local and local_db_port(self.db_uri) is None:
            raise ValueError(f"db_local: the core agent starts FerretDB on this host, so db_uri must name one "
                             f"loopback host (127.0.0.1 or localhost) without credentials, not {self.db_uri}")
        return self

    @model_validator(mode="after")
    def _fits_its_flavour(self) -> CoreProfile:
        problems = flavour_problems(self, self.flavour)
        if problems:
            raise ValueError("; ".join(problems))
        return self

    @property
    def gateway(self) -> str:
        """The UE subnet's first address: the PGW/UPF side of the tunnel (srsEPC's sgi_if_addr)."""
        return str(next(ipaddress.IPv4Network(self.ue_subnet).hosts()))

    @property
    def ue_prefix_len(self) -> int:
        return ipaddress.IPv4Network(self.ue_subnet).prefixlen


def check_db_uri(value: str) -> str:
    """A MongoDB URI to the grammar above: the hosts, a port in 1..65535, a database name MongoDB accepts."""
    match = DB_URI.fullmatch(value)
    hosts = match.group("hosts").split(",") if match else []
    if not match or not all(DB_HOST.fullmatch(h) for h in hosts):
        raise ValueError(f"not a MongoDB URI of the form {DB_URI_FORM}")
    for host in hosts:
        port = DB_HOST.fullmatch(host).group("port")  # type: ignore[union-attr]
        if port is not None and not 1 <= int(port) <= 65535:
            raise ValueError(f"port {port} is outside 1..65535")
    return value


_LOCAL_DB = re.compile(r"mongodb://(?:127\.0\.0\.1|localhost)(?::(?P<port>[0-9]{1,5}))?(?:/.*)?")


def local_db_port(db_uri: str) -> int | None:
    """The port of a db_uri naming one loopback host without credentials (a FerretDB the agent may start)."""
    match = _LOCAL_DB.fullmatch(db_uri)
    return int(match.group("port") or 27017) if match else None


def check_log_dir(value: str) -> str:
    folder = value.rstrip("/") if value != "/" else value
    parts = folder.split("/")
    if (not folder.startswith("/") or len(parts) < 2 or
            not all(LOG_DIR_COMPONENT.fullmatch(p) and p not in (".", "..") for p in parts[1:])):
        raise ValueError(f"log_dir must be {LOG_DIR_FORM}")
    if any(folder == d or folder.startswith(d + "/") for d in SYSTEM_DIRS) and not any(
            folder == d or folder.startswith(d + "/") for d in SYSTEM_DIRS_ALLOWED):
        raise ValueError(f"log_dir {folder} is a system folder; the daemons run as root: "
                         f"choose one outside {', '.join(SYSTEM_DIRS)}")
    return value


def flavour_problems(profile: CoreProfile, flavour: str) -> list[str]:
    """What one flavour cannot carry of a profile (srsEPC: one TAC, one APN, IPv4 S1 and DNS addresses)."""
    problems = []
    if flavour == "srsepc":
        if len(profile.tacs) != 1:
            problems.append(f"tacs: srsEPC serves one TAC (epc.conf `tac`), the profile lists {len(profile.tacs)}")
        if len(profile.apns) != 1:
            problems.append(f"apns: srsEPC serves one APN (epc.conf `apn`), the profile lists {len(profile.apns)}")
        for field, value in (("mme.s1ap_addr", profile.mme.s1ap_addr), ("gtpu_addr", profile.gtpu_addr),
                             *((f"dns[{i}]", d) for i, d in enumerate(profile.dns[:1]))):
            try:
                version = ipaddress.ip_address(value).version
            except ValueError:
                version = 0  # not an address at all: the field's own check, or the renderer's, says so
            if version == 6:
                problems.append(f"{field}: srsEPC binds and announces IPv4 only, not {value}")
    return problems


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
                           flavour=profile.flavour if "flavour" in profile.model_fields_set else "",
                           fields={"mcc": "plmn.mcc", "mnc": "plmn.mnc", "tac": "tacs", "mme": "mme.s1ap_addr"})
