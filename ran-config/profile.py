"""The eNB profile a person writes (YAML): every srsENB setting cellab varies, validated with pydantic.

`load_profile(path)` gives an `EnbProfile` or raises InputErrors naming the file, the field and the allowed
values; the srsENB rules that tie several fields together (PRACH vs PUCCH, rf ports, EARFCN band, SR PRBs)
live in rules.py, and `load_profile` applies them too.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from cellab.contracts.identity import NetworkIdentity
from cellab.errors import InputError, InputErrors, from_validation_error
from cellab.inputs import check_ip, read_yaml

if TYPE_CHECKING:
    from cellab.contracts.enb import RadioOverrides

N_PRB_VALUES = (6, 15, 25, 50, 75, 100)
SR_PERIODS_MS = (5, 10, 20, 40, 80)  # srsENB's alloc_sr_resources accepts these only (anchors §1.2)
CQI_PERIODS_MS = (2, 5, 10, 20, 40, 80, 160, 32, 64, 128)
DSR_TRANS_MAX = (4, 8, 16, 32, 64)
# Every string below reaches enb.conf (boost's INI reader) or device_args (comma-separated key=value): each
# has a grammar of printable ASCII without '#', ',' or blanks. Patterns run on pydantic's Rust engine, where
# `[0-9]` is ASCII (`\d` would take any Unicode digit) and `$` is the end of the text.
ZMQ_ENDPOINT = r"^tcp://(\*|[A-Za-z0-9]([A-Za-z0-9.-]{0,252}[A-Za-z0-9])?):[0-9]{1,5}$"
_KV = r"[A-Za-z0-9_]+=[A-Za-z0-9_.:/-]+"
UHD_EXTRA_ARGS = rf"^({_KV}(,{_KV})*)?$"
# keys cellab sets from the profile's own fields: extra_args must not set them again behind the rules' back
UHD_OWN_KEYS = ("type", "serial", "addr", "master_clock_rate", "clock", "time_source", "num_recv_frames",
                "num_send_frames", "recv_frame_size", "send_frame_size")


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


def _ip(value: str) -> str:
    return check_ip(value)  # canonical text; no IPv6 zone id ('%eth0'), no blanks, ASCII only


class EnbSection(Strict):
    enb_id: int = Field(0x19B, ge=0, lt=1 << 20, description="20-bit eNB id")
    mcc: str = Field("001", pattern=r"^[0-9]{3}$", description="3 ASCII digits")
    mnc: str = Field("01", pattern=r"^[0-9]{2,3}$", description="2 or 3 ASCII digits")
    mme_addr: str = "127.0.1.100"
    gtp_bind_addr: str = "127.0.1.1"
    s1c_bind_addr: str = "127.0.1.1"
    n_prb: Literal[6, 15, 25, 50, 75, 100] = 25
    tm: int = Field(1, ge=1, le=4, description="transmission mode")
    nof_ports: Literal[1, 2] = 1

    _addr = field_validator("mme_addr", "gtp_bind_addr", "s1c_bind_addr")(_ip)


class UhdDevice(Strict):
    kind: Literal["uhd"]
    family: Literal["b2xx", "x3xx", "n3xx"]
    serial: str | None = Field(None, pattern=r"^[A-Za-z0-9]{1,32}$")
    addr: str | None = Field(None, description="the USRP's IP address (X3xx, N3xx)")
    clock_source: Literal["internal", "external", "gpsdo"] = "internal"
    time_source: Literal["internal", "external", "gpsdo"] = "internal"
    master_clock_rate_hz: float | None = Field(None, gt=0, le=1e9, description="default: per family and n_prb")
    extra_args: str = Field("", max_length=256, pattern=UHD_EXTRA_ARGS,
                            description="more UHD device args: KEY=VALUE[,KEY=VALUE...]")

    @field_validator("addr")
    @classmethod
    def _addr(cls, value: str | None) -> str | None:
        return None if value is None else _ip(value)

    @field_validator("extra_args")
    @classmethod
    def _extra_args(cls, value: str) -> str:
        keys = [kv.split("=", 1)[0] for kv in value.split(",") if kv]
        own = [k for k in keys if k in UHD_OWN_KEYS]
        if own:
            raise ValueError(f"{own[0]} is set from the profile's own fields (family, serial, addr, "
                             f"master_clock_rate_hz, clock_source, time_source): set it there, where the rules "
                             f"check it; extra_args may not repeat {', '.join(UHD_OWN_KEYS)}")
        if len(set(keys)) != len(keys):
            raise ValueError("a key appears twice")
        return value


class ZmqDevice(Strict):
    kind: Literal["zmq"]
    tx_port: str = Field("tcp://*:2000", pattern=ZMQ_ENDPOINT, description="tcp://HOST:PORT, PORT 1..65535")
    rx_port: str = Field("tcp://localhost:2001", pattern=ZMQ_ENDPOINT, description="tcp://HOST:PORT, PORT 1..65535")
    base_srate_hz: float = Field(23.04e6, gt=0, le=(1 << 32) - 1,
                                 description="srsRAN's ZMQ radio rate (a uint32 of Hz): an integer multiple of the "
                                 "cell's sample rate")
    fail_on_disconnect: bool = True
    id: str = Field("enb", pattern=r"^[A-Za-z0-9_]{1,16}$")

    @field_validator("tx_port", "rx_port")
    @classmethod
    def _port(cls, value: str) -> str:
        port = int(value.rpartition(":")[2])
        if not 1 <= port <= 65535:
            raise ValueError(f"port {port} is outside 1..65535")
        return value


class RfSection(Strict):
    device: Annotated[UhdDevice | ZmqDevice, Field(discriminator="kind")] = Field(
        default_factory=lambda: ZmqDevice(kind="zmq"))
    tx_gain_db: float = Field(80.0, ge=0, le=100)
    rx_gain_db: float = Field(40.0, ge=0, le=100)
    time_adv_nsamples: int | None = Field(None, ge=0, le=1000)


class SrSection(Strict):
    period_ms: Literal[5, 10, 20, 40, 80] = 20
    subframe_offset: int | None = Field(None, ge=0, le=79, description="fixed SR subframe (I_SR offset); "
                                        "None: srsENB spreads UEs over even subframes")
    dsr_trans_max: Literal[4, 8, 16, 32, 64] = 64
    nof_prb: int = Field(1, ge=1, le=10, description="PUCCH PRBs per band edge for SR")


class CqiSection(Strict):
    period_ms: Literal[2, 5, 10, 20, 40, 80, 160, 32, 64, 128] = 40
    subframe_offset: int | None = Field(None, ge=0, le=159)
    mode: Literal["periodic", "aperiodic"] = "periodic"
    simultaneous_ack_cqi: bool = True
    m_ri: Literal[1, 2, 4, 8, 16, 32] = 8


class PucchSection(Strict):
    delta_pucch_shift: Literal[1, 2, 3] = 1
    n_rb_cqi: int = Field(1, ge=0, le=98)
    n_cs_an: int = Field(0, ge=0, le=7)
    n1_pucch_an: int = Field(12, ge=0, le=2047)


class PrachSection(Strict):
    config_index: int = Field(3, ge=0, le=63)
    freq_offset: int = Field(4, ge=0, le=94, description="first PRB of the PRACH")
    root_sequence_index: int = Field(128, ge=0, le=837)
    zero_correlation_zone_config: int = Field(5, ge=0, le=15)
    high_speed_flag: bool = False


class Cell(Strict):
    cell_id: int = Field(ge=0, le=255, description="the cell's 8-bit id inside the eNB")
    tac: int = Field(ge=0, le=0xFFFF)
    pci: int = Field(ge=0, le=503)
    dl_earfcn: int = Field(ge=0, le=262143)
    rf_port: int = Field(0, ge=0, le=7)
    tx_gain_db: float | None = Field(None, ge=-100, le=0, description="scaling of the source signal (cell_gain)")
    root_seq_idx: int | None = Field(None, ge=0, le=837)


class SchedulerSection(Strict):
    policy: Literal["time_pf", "time_rr"] = "time_pf"
    policy_args: str = Field("2", pattern=r"^[0-9.]{0,16}$")
    pdsch_mcs: int = Field(-1, ge=-1, le=28, description="fixed DL MCS, -1: adaptive")
    pusch_mcs: int = Field(-1, ge=-1, le=28)
    pdsch_max_mcs: int = Field(-1, ge=-1, le=28, description="-1: no limit")
    pusch_max_mcs: int = Field(-1, ge=-1, le=28)
    min_aggr_level: int = Field(0, ge=0, le=3)
    max_aggr_level: int = Field(3, ge=0, le=3)


class ReportSection(Strict):
    json_enable: bool = True
    json_filename: str = Field("enb_report.json", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    metrics_period_s: float = Field(1.0, gt=0, le=60)


class PcapSection(Strict):
    mac_enable: bool = False
    mac_filename: str = Field("enb_mac.pcap", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    s1ap_enable: bool = False
    s1ap_filename: str = Field("enb_s1ap.pcap", pattern=r"^[A-Za-z0-9_.-]{1,64}$")


class LogSection(Strict):
    all_level: Literal["debug", "info", "warning", "error", "none"] = "warning"
    filename: str = Field("enb.log", pattern=r"^[A-Za-z0-9_.-]{1,64}$")


class UlAwgn(Strict):
    """srsenb's uplink channel emulator adding white Gaussian noise to what its radio receives, at the fixed level
    signal_power_dbfs - snr_db (dB full scale; srsRAN's channel.cc sets n0 so). Over ZMQ nothing else adds noise
    at the eNB's receiver, so without it a UE's uplink attenuation changes no SNR there."""

    signal_power_dbfs: float = Field(0.0, ge=-100, le=100, description="srsenb's channel.ul.awgn.signal_power")
    snr_db: float = Field(ge=-100, le=200, description="srsenb's channel.ul.awgn.snr")


class ChannelSection(Strict):
    ul_awgn: UlAwgn | None = Field(None, description="srsenb's uplink noise floor (none: no channel emulator)")


class EnbProfile(Strict):
    name: str = Field("enb", pattern=r"^[A-Za-z0-9_.-]{1,64}$")
    enb: EnbSection = Field(default_factory=EnbSection)
    rf: RfSection = Field(default_factory=RfSection)
    sr: SrSection = Field(default_factory=SrSection)
    cqi: CqiSection = Field(default_factory=CqiSection)
    pucch: PucchSection = Field(default_factory=PucchSection)
    prach: PrachSection = Field(default_factory=PrachSection)
    cells: list[Cell] = Field(min_length=1, max_length=8)
    scheduler: SchedulerSection = Field(default_factory=SchedulerSection)
    report: ReportSection = Field(default_factory=ReportSection)
    pcap: PcapSection = Field(default_factory=PcapSection)
    log: LogSection = Field(default_factory=LogSection)
    channel: ChannelSection = Field(default_factory=ChannelSection)


def parse_profile(data: object, source: str | Path) -> EnbProfile:
    """A profile from parsed YAML; schema and srsENB rule errors together, naming `source`."""
    from cellab.ran.rules import check_rules

    if not isinstance(data, dict):
        raise InputErrors([from_validation_error(source, _not_a_mapping()).errors[0]])
    try:
        profile = EnbProfile.model_validate(data)
    except ValidationError as exc:
        raise from_validation_error(source, exc) from None
    problems = check_rules(profile, source)
    if problems:
        raise InputErrors(problems)
    return profile


def _not_a_mapping() -> ValidationError:
    try:
        EnbProfile.model_validate("not a mapping")
    except ValidationError as exc:
        return exc
    raise AssertionError("unreachable")


def load_profile(path: str | Path) -> EnbProfile:
    return parse_profile(read_yaml(path), path)


FIELDS = {"mcc": "enb.mcc", "mnc": "enb.mnc", "tac": "cells[].tac", "mme": "enb.mme_addr"}


def identity_of(profile: EnbProfile, source: str | Path) -> NetworkIdentity:
    return NetworkIdentity(source=str(source), mcc=profile.enb.mcc, mnc=profile.enb.mnc,
                           tacs=[cell.tac for cell in profile.cells], mme_addrs=[profile.enb.mme_addr],
                           cell_ids=[cell.cell_id for cell in profile.cells], radio=profile.rf.device.kind,
                           fields=FIELDS)


def network_identity(path: str | Path) -> NetworkIdentity:
    """Entry point `cellab.identity: enb`: the PLMN, TACs and MME address of an eNB profile."""
    return identity_of(load_profile(path), path)


def apply_overrides(data: dict, overrides: RadioOverrides) -> dict:
    """The profile's YAML data with a run's radio parameters set, as the eNB agent renders them."""
    o = overrides
    data = json.loads(json.dumps(data))  # a deep copy of plain data
    sets: list[tuple[tuple[str, ...], Any]] = [
        (("enb", "n_prb"), o.n_prb), (("sr", "period_ms"), o.sr_period_ms), (("sr", "subframe_offset"), o.sr_offset_ms),
        (("cqi", "period_ms"), o.cqi_period_ms), (("rf", "tx_gain_db"), o.tx_gain_db), (("rf", "rx_gain_db"), o.rx_gain_db)]
    for (section, key), value in sets:
        if value is not None:
            data.setdefault(section, {})[key] = value
    if o.dl_earfcn is not None and data.get("cells"):
        data["cells"][0]["dl_earfcn"] = o.dl_earfcn
    if o.n_prb == 6:
        data.setdefault("prach", {})["freq_offset"] = 0  # the only PRACH place in a 6-PRB cell
    return data


def overrides_problems(path: str | Path, radio: dict[str, Any]) -> list[str]:
    """Entry point `cellab.services: enb_overrides`: what srsENB's rules refuse of the profile at `path` with a
    run's radio parameters applied (RadioOverrides fields), one line each; empty when it takes them. Asked
    for every planned run, so one answer per profile and set of values."""
    return list(_overrides_problems(str(path), json.dumps(radio, sort_keys=True)))


@functools.lru_cache(maxsize=256)
def _overrides_problems(path: str, radio_json: str) -> tuple[str, ...]:
    from cellab.contracts.enb import RadioOverrides

    source = f"{path} with {', '.join(f'{k}={v}' for k, v in json.loads(radio_json).items())}"
    try:
        parse_profile(apply_overrides(read_yaml(path), RadioOverrides(**json.loads(radio_json))), source)
    except InputErrors as exc:
        return tuple(f"{e.field}: {e.message}" + (f" (allowed: {', '.join(map(str, e.allowed))})" if e.allowed else "")
                     for e in exc.errors)
    except InputError as exc:
        return (exc.render(),)
    return ()
