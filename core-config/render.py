"""Render a core profile into one flavour's configuration files.

Open5GS 2.7+ (`server:`/`client:` lists of `address:`), Open5GS 2.6 (`- addr:` lists), NextEPC 0.3.10
(per-daemon YAML + freeDiameter peers) and srsEPC (epc.conf INI). Keys and layouts: anchors.md §2; the
internal loopback addresses between daemons are each project's defaults. Files are built as data and
emitted by the YAML/INI writers, so what we write always parses back.

Every value is checked before it is written (`_check_yaml`, `_check_ini`, `_check_fd`): the profile's own
grammar refuses bad values first, and the renderers refuse (InputError naming the file, the key and the
allowed form) what a format cannot carry: a line break or '[' line would otherwise start a new INI section
of a daemon that runs as root."""

from __future__ import annotations

import configparser
import io
from pathlib import Path
from typing import Any

import yaml

from cellab.errors import InputError
from cellab.inputs import text_problem

from .profile import CoreProfile, flavour_problems

# printable ASCII, no line break: a YAML string, an INI value (boost's reader also strips blanks and cuts
# at '#'), a double-quoted freeDiameter string (no '"' or '\')
VALUE_FORM = "printable ASCII on one line"
INI_SPECIAL = "#"
FD_SPECIAL = '"\\;'

# Open5GS defaults: mme .2, sgwc .3, smf .4, hss .8, pcrf .9, sgwu .6, upf .7
O5_MME, O5_SGWC, O5_SMF, O5_SGWU, O5_UPF, O5_HSS, O5_PCRF = (f"127.0.0.{n}" for n in (2, 3, 4, 6, 7, 8, 9))
METRICS_PORT = 9090
# NextEPC (Debian's /etc/nextepc): mme .2 (diameter), sgw .2 (gtpc), pgw .3, hss .4, pcrf .5. The MME's own
# GTP-C gets .1: on the SGW's .2:2123 its Create Session Requests came back to itself.
NX_MME, NX_SGW, NX_PGW, NX_HSS, NX_PCRF = (f"127.0.0.{n}" for n in (2, 2, 3, 4, 5))
NX_MME_GTPC = "127.0.0.1"
NEXTEPC_FD_DIR = "/etc/nextepc/freeDiameter"  # the packages' certificates and extensions
OPEN5GS_ETC = "/etc/open5gs"


def _plmn(p: CoreProfile) -> dict[str, str]:
    return {"mcc": p.plmn.mcc, "mnc": p.plmn.mnc}


def _logger_27(p: CoreProfile, daemon: str) -> dict[str, Any]:
    return {"file": {"path": f"{p.log_dir}/{daemon}.log"}}


def _logger_26(p: CoreProfile, daemon: str) -> dict[str, Any]:
    return {"file": f"{p.log_dir}/{daemon}.log"}


def _db_uri(p: CoreProfile, database: str) -> str:
    """The profile's server with the flavour's database name when the URI names none."""
    head, _, tail = p.db_uri.partition("://")
    host, slash, rest = tail.partition("/")
    name, q, query = rest.partition("?")
    return f"{head}://{host}/{name or database}{q}{query}"


def open5gs_27(p: CoreProfile, fd_dir: str = f"{OPEN5GS_ETC}/freeDiameter") -> dict[str, dict]:
    """fd_dir: where the daemons' freeDiameter confs are (the packages' /etc/open5gs/freeDiameter, or the ones
    `open5gs_fd_conf` renders beside the YAML for an Open5GS installed elsewhere)."""
    def srv(addr: str, **extra: Any) -> dict[str, Any]:
        return {"server": [{"address": addr, **extra}]}

    fd = fd_dir
    session = [{"subnet": p.ue_subnet, "gateway": p.gateway}]
    mme = {
        "logger": _logger_27(p, "mme"), "global": {"max": {"ue": 1024}},
        "mme": {
            "freeDiameter": f"{fd}/mme.conf",
            "s1ap": srv(p.mme.s1ap_addr),
            "gtpc": {**srv(O5_MME), "client": {"sgwc": [{"address": O5_SGWC}], "smf": [{"address": O5_SMF}]}},
            "metrics": srv(O5_MME, port=METRICS_PORT),
            "gummei": [{"plmn_id": _plmn(p), "mme_gid": p.mme.group_id, "mme_code": p.mme.code}],
            "tai": [{"plmn_id": _plmn(p), "tac": list(p.tacs)}],
            "security": {"integrity_order": p.mme.integrity_order, "ciphering_order": p.mme.ciphering_order},
            "network_name": {"full": p.mme.network_name, "short": p.mme.network_name},
            "mme_name": p.mme.name,
        },
    }
    return {
        "mme.yaml": mme,
        "sgwc.yaml": {"logger": _logger_27(p, "sgwc"), "sgwc": {
            "gtpc": srv(O5_SGWC), "pfcp": {**srv(O5_SGWC), "client": {"sgwu": [{"address": O5_SGWU}]}}}},
        "sgwu.yaml": {"logger": _logger_27(p, "sgwu"), "sgwu": {"pfcp": srv(O5_SGWU), "gtpu": srv(p.gtpu_addr)}},
        "smf.yaml": {"logger": _logger_27(p, "smf"), "smf": {
            "pfcp": {**srv(O5_SMF), "client": {"upf": [{"address": O5_UPF}]}},
            "gtpc": srv(O5_SMF), "gtpu": srv(O5_SMF), "metrics": srv(O5_SMF, port=METRICS_PORT),
            "session": session, "dns": list(p.dns), "mtu": p.mtu, "freeDiameter": f"{fd}/smf.conf"}},
        "upf.yaml": {"logger": _logger_27(p, "upf"), "upf": {
            "pfcp": srv(O5_UPF), "gtpu": srv(O5_UPF), "session": session,
            "metrics": srv(O5_UPF, port=METRICS_PORT)}},
        "hss.yaml": {"db_uri": _db_uri(p, "open5gs"), "logger": _logger_27(p, "hss"),
                     "hss": {"freeDiameter": f"{fd}/hss.conf"}},
        "pcrf.yaml": {"db_uri": _db_uri(p, "open5gs"), "logger": _logger_27(p, "pcrf"),
                      "pcrf": {"freeDiameter": f"{fd}/pcrf.conf", "metrics": srv(O5_PCRF, port=METRICS_PORT)}},
    }


def open5gs_26(p: CoreProfile) -> dict[str, dict]:
    fd = f"{OPEN5GS_ETC}/freeDiameter"
    subnet = [{"addr": f"{p.gateway}/{p.ue_prefix_len}"}]
    mme = {
        "logger": _logger_26(p, "mme"),
        "mme": {
            "freeDiameter": f"{fd}/mme.conf",
            "s1ap": [{"addr": p.mme.s1ap_addr}],
            "gtpc": [{"addr": O5_MME}],
            "metrics": [{"addr": O5_MME, "port": METRICS_PORT}],
            "gummei": {"plmn_id": _plmn(p), "mme_gid": p.mme.group_id, "mme_code": p.mme.code},
            "tai": {"plmn_id": _plmn(p), "tac": list(p.tacs)},
            "security": {"integrity_order": p.mme.integrity_order, "ciphering_order": p.mme.ciphering_order},
            "network_name": {"full": p.mme.network_name},
            "mme_name": p.mme.name,
        },
        # ≤2.6: a daemon's peers are sections named after them, in its own file
        "sgwc": {"gtpc": [{"addr": O5_SGWC}]},
        "smf": {"gtpc": [{"addr": O5_SMF}]},
    }
    return {
        "mme.yaml": mme,
        "sgwc.yaml": {"logger": _logger_26(p, "sgwc"),
                      "sgwc": {"gtpc": [{"addr": O5_SGWC}], "pfcp": [{"addr": O5_SGWC}]},
                      "sgwu": {"pfcp": [{"addr": O5_SGWU}]}},
        "sgwu.yaml": {"logger": _logger_26(p, "sgwu"),
                      "sgwu": {"pfcp": [{"addr": O5_SGWU}], "gtpu": [{"addr": p.gtpu_addr}]}},
        "smf.yaml": {"logger": _logger_26(p, "smf"),
                     "smf": {"pfcp": [{"addr": O5_SMF}], "gtpc": [{"addr": O5_SMF}], "gtpu": [{"addr": O5_SMF}],
                             "metrics": [{"addr": O5_SMF, "port": METRICS_PORT}], "subnet": subnet,
                             "dns": list(p.dns), "mtu": p.mtu, "freeDiameter": f"{fd}/smf.conf"},
                     "upf": {"pfcp": [{"addr": O5_UPF}]}},
        "upf.yaml": {"logger": _logger_26(p, "upf"),
                     "upf": {"pfcp": [{"addr": O5_UPF}], "gtpu": [{"addr": O5_UPF}], "subnet": subnet,
                             "metrics": [{"addr": O5_UPF, "port": METRICS_PORT}]}},
        "hss.yaml": {"db_uri": _db_uri(p, "open5gs"), "logger": _logger_26(p, "hss"),
                     "hss": {"freeDiameter": f"{fd}/hss.conf"}},
        "pcrf.yaml": {"db_uri": _db_uri(p, "open5gs"), "logger": _logger_26(p, "pcrf"),
                      "pcrf": {"freeDiameter": f"{fd}/pcrf.conf"}},
    }


def _nx_logger(p: CoreProfile, daemon: str, traces: tuple[str, ...]) -> dict[str, Any]:
    return {"file": f"{p.log_dir}/{daemon}.log", "trace": {t: 1 for t in ("app", *traces)}}


def nextepc(p: CoreProfile, out: Path) -> dict[str, dict]:
    """Per-daemon files as Debian's packages run them (`nextepc-hssd -f hss.conf`), plus the all-in-one
    nextepc.conf; the freeDiameter files point at the rendered folder."""
    fd = out / "freeDiameter"
    sections = {
        "mme": {"freeDiameter": str(fd / "mme.conf"), "s1ap": {"addr": p.mme.s1ap_addr}, "gtpc": {"addr": NX_MME_GTPC},
                "gummei": {"plmn_id": _plmn(p), "mme_gid": p.mme.group_id, "mme_code": p.mme.code},
                "tai": [{"plmn_id": _plmn(p), "tac": t} for t in p.tacs],
                "security": {"integrity_order": p.mme.integrity_order, "ciphering_order": p.mme.ciphering_order},
                "network_name": {"full": p.mme.network_name}},
        "hss": {"freeDiameter": str(fd / "hss.conf")},
        "sgw": {"gtpc": {"addr": NX_SGW}, "gtpu": {"addr": p.gtpu_addr}},
        "pgw": {"freeDiameter": str(fd / "pgw.conf"), "gtpc": {"addr": [NX_PGW]}, "gtpu": [{"addr": NX_PGW}],
                "ue_pool": [{"addr": f"{p.gateway}/{p.ue_prefix_len}", "apn": a.name} for a in p.apns],
                "dns": list(p.dns)},
        "pcrf": {"freeDiameter": str(fd / "pcrf.conf")},
    }
    db = _db_uri(p, "nextepc")
    param = {"no_ipv6": True}
    files = {
        "nextepc.conf": {"db_uri": db, "logger": _nx_logger(p, "nextepc", ("s1ap", "nas", "diameter", "gtpv2", "gtp")),
                         "parameter": param, **sections},
        "hss.conf": {"db_uri": db, "logger": _nx_logger(p, "hss", ("diameter",)), "parameter": param,
                     "hss": sections["hss"]},
        "pcrf.conf": {"db_uri": db, "logger": _nx_logger(p, "pcrf", ("diameter",)), "parameter": param,
                      "pcrf": sections["pcrf"]},
        "sgw.conf": {"logger": _nx_logger(p, "sgw", ("gtpv2", "gtp")), "parameter": param, "sgw": sections["sgw"]},
        "pgw.conf": {"logger": _nx_logger(p, "pgw", ("diameter", "gtpv2", "gtp")), "parameter": param,
                     "pgw": sections["pgw"]},
        "mme.conf": {"logger": _nx_logger(p, "mme", ("s1ap", "nas", "diameter", "gtpv2")), "parameter": param,
                     "mme": sections["mme"], "sgw": {"gtpc": sections["sgw"]["gtpc"]},
                     "pgw": {"gtpc": sections["pgw"]["gtpc"]}},
    }
    return files


# freeDiameter peers of NextEPC: identity, listen address, the peer it dials, the dictionaries it needs
_FD_PEERS = {"mme": (NX_MME, "hss"), "hss": (NX_HSS, "mme"), "pgw": (NX_PGW, "pcrf"), "pcrf": (NX_PCRF, "pgw")}
_FD_ADDR = {"mme": NX_MME, "hss": NX_HSS, "pgw": NX_PGW, "pcrf": NX_PCRF}
_FD_DICTS = ("dict_rfc5777", "dict_mip6i", "dict_nasreq", "dict_nas_mipv6", "dict_dcca", "dict_dcca_3gpp")


def freediameter_conf(daemon: str, realm: str = "localdomain") -> str:
    _check_fd(f"freeDiameter/{daemon}.conf", "Realm", realm)
    listen, peer = _FD_PEERS[daemon]
    dicts = _FD_DICTS + (("dict_s6a",) if daemon in ("mme", "hss") else ())
    lines = [f'Identity = "{daemon}.{realm}";', f'Realm = "{realm}";', "No_SCTP;", f'ListenOn = "{listen}";',
             f'TLS_Cred = "{NEXTEPC_FD_DIR}/{daemon}.cert.pem", "{NEXTEPC_FD_DIR}/{daemon}.key.pem";',
             f'TLS_CA = "{NEXTEPC_FD_DIR}/cacert.pem";']
    lines += [f'LoadExtension = "{d}.so";' for d in dicts]
    lines.append(f'ConnectPeer = "{peer}.{realm}" {{ ConnectTo = "{_FD_ADDR[peer]}"; No_TLS; }};')
    return "\n".join(lines) + "\n"


# Open5GS's Diameter peers (EPC): identity, listen address, its peer. Both sides name each other, as Open5GS's
# own confs do: freeDiameter refuses a CER from a peer it does not know (measured: the MME's CER to an HSS
# without its ConnectPeer failed "fd_p_ce_msgrcv ... Invalid argument", AIR "No remaining suitable candidate")
_O5_FD = {"mme": (O5_MME, "hss"), "hss": (O5_HSS, "mme"), "smf": (O5_SMF, "pcrf"), "pcrf": (O5_PCRF, "smf")}
_O5_FD_DICTS = ("dict_rfc5777", "dict_mip6i", "dict_nasreq", "dict_nas_mipv6", "dict_dcca", "dict_dcca_3gpp")


def open5gs_fd_conf(daemon: str, prefix: Path, realm: str = "localdomain") -> str:
    """The freeDiameter conf of one Open5GS daemon installed under `prefix` (bin/, lib/freeDiameter/*.fdx,
    etc/open5gs/tls/): its TLS files and extensions by absolute path, Diameter over TCP (`No_SCTP`: on a
    kernel without SCTP freeDiameter aborts at start otherwise)."""
    file = f"freeDiameter/{daemon}.conf"
    tls, ext = prefix / "etc" / "open5gs" / "tls", prefix / "lib" / "freeDiameter"
    for key, value in (("Realm", realm), ("TLS_Cred", str(tls)), ("LoadExtension", str(ext))):
        _check_fd(file, key, value)
    listen, peer = _O5_FD[daemon]
    lines = [f'Identity = "{daemon}.{realm}";', f'Realm = "{realm}";', f'ListenOn = "{listen}";', "No_SCTP;",
             f'TLS_Cred = "{tls}/{daemon}.crt", "{tls}/{daemon}.key";', f'TLS_CA = "{tls}/ca.crt";', "NoRelay;"]
    lines += [f'LoadExtension = "{ext}/{d}.fdx";' for d in _O5_FD_DICTS]
    lines.append(f'ConnectPeer = "{peer}.{realm}" {{ ConnectTo = "{_O5_FD[peer][0]}"; No_TLS; }};')
    return "\n".join(lines) + "\n"


def srsepc_conf(p: CoreProfile, user_db: Path | None = None) -> str:
    """user_db: name it, and the log (in the profile's log_dir), by absolute path (srsEPC opens them
    relative to its working folder otherwise)."""
    db_file, log_file = ("user_db.csv", "epc.log") if user_db is None else (str(user_db), f"{p.log_dir}/epc.log")
    ini = configparser.ConfigParser(interpolation=None)
    ini["mme"] = {"mme_code": f"0x{p.mme.code:02x}", "mme_group": f"0x{p.mme.group_id:04x}",
                  "tac": f"0x{p.tacs[0]:04x}", "mcc": p.plmn.mcc, "mnc": p.plmn.mnc,
                  "mme_bind_addr": p.mme.s1ap_addr, "apn": p.apns[0].name, "dns_addr": p.dns[0] if p.dns else "8.8.8.8",
                  "encryption_algo": p.mme.ciphering_order[0], "integrity_algo": _srs_integrity(p),
                  "paging_timer": "2", "request_imeisv": "false", "full_net_name": p.mme.network_name,
                  "short_net_name": p.mme.network_name}
    ini["hss"] = {"db_file": db_file}
    ini["spgw"] = {"gtpu_bind_addr": p.gtpu_addr, "sgi_if_addr": p.gateway, "sgi_if_name": "srs_spgw_sgi",
                   "max_paging_queue": "100"}
    ini["pcap"] = {"enable": "false", "filename": "epc.pcap"}
    # hex limit 0: at info srsEPC dumps the NAS keys (k_nas_enc, k_nas_int), K_eNB, RES and XRES in hex into epc.log,
    # which the core agent keeps with the run
    ini["log"] = {"all_level": "info", "all_hex_limit": "0", "filename": log_file}
    _check_ini("epc.conf", ini)
    text = io.StringIO()
    text.write(f"# srsEPC configuration rendered by cellab from profile {p.name}\n")
    ini.write(text)
    return text.getvalue()


def _srs_integrity(p: CoreProfile) -> str:
    # srsEPC accepts EIA1 or EIA2 only (no null integrity for NAS)
    return next((a for a in p.mme.integrity_order if a != "EIA0"), "EIA1")


def _check_value(file: str, key: str, value: object, special: str = "") -> None:
    if isinstance(value, str):
        problem = text_problem(value, special)
        if problem:
            raise InputError(file, key, f"the value {problem}: it cannot be written into {file}",
                             [VALUE_FORM + (f", without {' '.join(special)}" if special else "")])


def _check_yaml(file: str, data: object, key: str = "") -> None:
    """Every key and string of a YAML file: printable ASCII on one line (the daemons' fields want no more,
    and a value must read back as the one line it is)."""
    if isinstance(data, dict):
        for k, v in data.items():
            _check_value(file, f"{key}.{k}" if key else str(k), k)
            _check_yaml(file, v, f"{key}.{k}" if key else str(k))
    elif isinstance(data, list):
        for i, v in enumerate(data):
            _check_yaml(file, v, f"{key}[{i}]")
    else:
        _check_value(file, key, data)


def _check_ini(file: str, ini: configparser.ConfigParser) -> None:
    """srsEPC reads epc.conf with boost's INI reader: a line break starts a new key or [section], '#' ends the
    value, blanks around it are dropped."""
    for section in ini.sections():
        for key, value in ini[section].items():
            _check_value(file, f"{section}.{key}", value, INI_SPECIAL)


def _check_fd(file: str, key: str, value: str) -> None:
    _check_value(file, key, value, FD_SPECIAL)


def _dump_yaml(data: dict, file: str = "") -> str:
    _check_yaml(file, data)
    text = yaml.safe_dump(data, sort_keys=False, default_flow_style=False)
    if yaml.safe_load(text) != data:  # what we write must read back as what we meant
        raise InputError(file, "", "the rendered YAML does not read back as written")
    return text


def render(profile: CoreProfile, flavour: str, out: Path, subscribers_csv: str | None = None,
           user_db: Path | None = None, open5gs_prefix: Path | None = None) -> list[Path]:
    """Write `flavour`'s files into `out`; returns their paths. srsEPC gets a user_db.csv (empty of
    subscribers unless `subscribers_csv` is given: `cellab core subscribers export` writes one) in `out`,
    or at `user_db` (an absolute path, mode 0600: it holds K and OPc), which epc.conf then names.
    open5gs_prefix (flavour open5gs): an Open5GS installed there rather than by the packages (e.g. the
    shared bundle): its freeDiameter confs are rendered into `out/freeDiameter/` and the YAML names them."""
    out = Path(out)
    problems = flavour_problems(profile, flavour)
    if problems:
        raise InputError(f"core profile {profile.name}", f"flavour {flavour}", "; ".join(problems))
    _check_value("core profile", "name", profile.name, INI_SPECIAL)  # it is in each file's first comment line
    texts: dict[str, str] = {}
    header = f"# rendered by cellab from core profile {profile.name} ({flavour})\n"
    if flavour == "open5gs" and open5gs_prefix is not None:
        fd_dir = out.resolve() / "freeDiameter"
        _check_value("mme.yaml", "mme.freeDiameter", str(fd_dir))
        texts = {name: header + _dump_yaml(data, name) for name, data in open5gs_27(profile, str(fd_dir)).items()}
        for daemon in _O5_FD:
            texts[f"freeDiameter/{daemon}.conf"] = open5gs_fd_conf(daemon, Path(open5gs_prefix).resolve())
    elif flavour == "open5gs":
        texts = {name: header + _dump_yaml(data, name) for name, data in open5gs_27(profile).items()}
    elif flavour == "open5gs-2.6":
        texts = {name: header + _dump_yaml(data, name) for name, data in open5gs_26(profile).items()}
    elif flavour == "nextepc":
        texts = {name: header + _dump_yaml(data, name) for name, data in nextepc(profile, out.resolve()).items()}
        for daemon in _FD_PEERS:
            texts[f"freeDiameter/{daemon}.conf"] = freediameter_conf(daemon)
    elif flavour == "srsepc":
        from .subscribers import SRSEPC_CSV_HEADER

        texts = {"epc.conf": srsepc_conf(profile, user_db)}
        out.mkdir(parents=True, exist_ok=True)
        db_path = user_db or out / "user_db.csv"
        db_path.touch(mode=0o600)
        db_path.write_text(subscribers_csv or SRSEPC_CSV_HEADER)
        if user_db is None:
            texts["user_db.csv"] = subscribers_csv or SRSEPC_CSV_HEADER
    else:
        from .profile import FLAVOURS

        raise ValueError(f"unknown flavour {flavour!r} (allowed: {', '.join(FLAVOURS)})")
    # every file is built and checked before the first is written: a refused value leaves no half a config
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for name, text in texts.items():
        path = out / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        written.append(path)
    return written
