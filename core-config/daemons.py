"""Each flavour's daemons: program, arguments (the rendered file), start order, where each must listen, and
the log lines that say why a UE did not attach."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from . import render as r
from .profile import CoreProfile

LOG_SCAN_BYTES = 1 << 20  # a daemon in an error loop writes gigabytes: a read takes at most this (logbound.py)


@dataclass(frozen=True)
class Daemon:
    name: str
    program: str
    config: str  # rendered file, relative to the run's config folder
    flag: str  # how the program is told its configuration ("" = positional)
    ports: tuple[tuple[str, str, int], ...] = field(default_factory=tuple)  # (proto, addr, port)
    args: tuple[str, ...] = ()  # with no config: the arguments ("{data}" = a private folder of the run's)

    def argv(self, program_path: str, config_dir: Path, data_dir: Path | None = None) -> list[str]:
        if not self.config:
            return [program_path, *(a.replace("{data}", str(data_dir)) for a in self.args)]
        conf = str(config_dir / self.config)
        return [program_path, self.flag, conf] if self.flag else [program_path, conf]


DIAMETER_PORT, GTPC_PORT, GTPU_PORT = 3868, 2123, 2152


def local_db(p: CoreProfile) -> list[Daemon]:
    """db_local: the run's own FerretDB (MongoDB wire on SQLite) at db_uri's loopback port, first of all; its
    data (K, OPc) in a private folder of the agent's, never among the artifacts."""
    from .profile import local_db_port

    port = local_db_port(p.db_uri) if p.db_local else None
    if port is None:
        return []
    return [Daemon("db", "cellab-ferretdb", "", "", (("tcp", "127.0.0.1", port),),
                   ("--listen-addr", f"127.0.0.1:{port}", "--data-dir", "{data}", "--log-level", "warn"))]


def daemons_for(flavour: str, p: CoreProfile) -> list[Daemon]:
    """In start order: the database (db_local), the HSS and PCRF first (the MME and PGW dial them)."""
    if flavour == "srsepc":
        return [Daemon("epc", "srsepc", "epc.conf", "", (("udp", p.gtpu_addr, GTPU_PORT),))]
    return local_db(p) + _daemons(flavour, p)


def _daemons(flavour: str, p: CoreProfile) -> list[Daemon]:
    if flavour == "nextepc":
        return [
            Daemon("hss", "nextepc-hssd", "hss.conf", "-f", (("tcp", r.NX_HSS, DIAMETER_PORT),)),
            Daemon("pcrf", "nextepc-pcrfd", "pcrf.conf", "-f", (("tcp", r.NX_PCRF, DIAMETER_PORT),)),
            Daemon("sgw", "nextepc-sgwd", "sgw.conf", "-f", (("udp", r.NX_SGW, GTPC_PORT), ("udp", p.gtpu_addr, GTPU_PORT))),
            Daemon("pgw", "nextepc-pgwd", "pgw.conf", "-f", (("tcp", r.NX_PGW, DIAMETER_PORT),
                                                             ("udp", r.NX_PGW, GTPC_PORT))),
            Daemon("mme", "nextepc-mmed", "mme.conf", "-f", (("tcp", r.NX_MME, DIAMETER_PORT),
                                                             ("udp", r.NX_MME_GTPC, GTPC_PORT))),
        ]
    if flavour in ("open5gs", "open5gs-2.6"):
        return [
            Daemon("hss", "open5gs-hssd", "hss.yaml", "-c", (("tcp", r.O5_HSS, DIAMETER_PORT),)),
            Daemon("pcrf", "open5gs-pcrfd", "pcrf.yaml", "-c", (("tcp", r.O5_PCRF, DIAMETER_PORT),)),
            Daemon("sgwc", "open5gs-sgwcd", "sgwc.yaml", "-c", (("udp", r.O5_SGWC, GTPC_PORT),)),
            Daemon("sgwu", "open5gs-sgwud", "sgwu.yaml", "-c", (("udp", p.gtpu_addr, GTPU_PORT),)),
            Daemon("upf", "open5gs-upfd", "upf.yaml", "-c", (("udp", r.O5_UPF, GTPU_PORT),)),
            Daemon("smf", "open5gs-smfd", "smf.yaml", "-c", (("udp", r.O5_SMF, GTPC_PORT),)),
            Daemon("mme", "open5gs-mmed", "mme.yaml", "-c", (("udp", r.O5_MME, GTPC_PORT),)),
        ]
    raise ValueError(f"unknown flavour {flavour!r}")


# (kind, pattern) over the daemons' logs; first match per line wins
LOG_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("imsi_unknown", re.compile(r"Cannot find IMSI|User Unknown|not found in HSS|Could not find UE.*IMSI|"
                                r"User not found", re.I)),
    ("s1_setup_failure", re.compile(r"S1[ _-]?Setup[ _-]?Fail|S1SetupFailure", re.I)),
    ("sqn_error", re.compile(r"Cannot increment SQN|SQN.*(fail|error)|synch(roni[sz]ation)? failure", re.I)),
    # not merely a line naming a mongoc source file (Open5GS's INFO "MongoDB URI: ... ogs-mongoc.c")
    # the UE's answer to a challenge it cannot verify (K/OPc differ from the HSS's): Open5GS's MME logs
    # "Authentication failure(MAC failure)" and rejects (after sqn_error: a SYNCH failure is a stale SQN)
    ("auth_failure", re.compile(r"Authentication failure|MAC failure|Authentication reject", re.I)),
    ("db_error", re.compile(r"mongoc\w*\W.*(error|fail|refused|timed? ?out)|Failed to connect to server|"
                            r"DB .*(fail|error)|database.*(fail|error)", re.I)),
    ("attach_ok", re.compile(r"Attach (Accept|Complete)|Network attach successful", re.I)),
    ("error", re.compile(r"\b(ERROR|ERRR|FATL|FATAL|CRIT)\b|\[error\]|: error:|invalid option|unrecognized option|"
                         r"No such file|Permission denied|cannot |can't |failed", re.I)),
)

# a daemon's version, from the first lines it writes: Open5GS/NextEPC "Open5GS daemon v2.7.7", srsEPC "Built in
# Release mode using 23.04.0."
VERSION_LINES = (re.compile(r"\b(Open5GS|NextEPC) daemon (v[0-9][0-9A-Za-z.+~-]*)"),
                 re.compile(r"Built in \w+ mode using (?:commit \w+ on branch \S+|([0-9][0-9A-Za-z.+~-]*?))\.?$",
                            re.M))


def version_of(text: str, flavour: str) -> str:
    """'Open5GS v2.7.7', 'srsEPC 23.04.0', ... or '' when the output does not say."""
    match = VERSION_LINES[0].search(text)
    if match:
        return f"{match.group(1)} {match.group(2)}"
    match = VERSION_LINES[1].search(text)
    if match and match.group(1) and flavour == "srsepc":
        return f"srsEPC {match.group(1)}"
    return ""


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def classify(line: str) -> str | None:
    for kind, pattern in LOG_PATTERNS:
        if pattern.search(line):
            return kind
    return None


def clean(line: str) -> str:
    return _ANSI.sub("", line).strip()


_FATAL = re.compile(r"\b(FATL|FATAL|CRIT|PANIC)\b", re.I)


def start_error_line(text: str) -> str:
    """A dead daemon's own reason: its first fatal line (the cause; teardown noise follows it), else its
    first error line, else its last line."""
    lines = [clean(line) for line in text.splitlines() if clean(line)]
    for wanted in (lambda line: bool(_FATAL.search(line)), lambda line: classify(line) not in (None, "attach_ok")):
        for line in lines:
            if wanted(line):
                return line[:400]
    return lines[-1][:400] if lines else "(no output)"


def listening(ports: tuple[tuple[str, str, int], ...], pid: int | None = None) -> dict[str, bool]:
    """Whether each (proto, addr, port) is bound (TCP: listening), seen from the network namespace of `pid`."""
    base = f"/proc/{pid}/net" if pid else "/proc/net"
    tables = {proto: _read_table(f"{base}/{proto}", proto) for proto in {p for p, _, _ in ports}}
    return {f"{proto} {addr}:{port}": (addr, port) in tables[proto] or ("0.0.0.0", port) in tables[proto]
            for proto, addr, port in ports}


def _read_table(path: str, proto: str) -> set[tuple[str, int]]:
    """(addr, port) of the IPv4 sockets of a /proc/net table; TCP ones only in state LISTEN (0A)."""
    found: set[tuple[str, int]] = set()
    try:
        lines = Path(path).read_text().splitlines()[1:]
    except OSError:
        return found
    for line in lines:
        parts = line.split()
        if proto == "tcp" and parts[3] != "0A":
            continue
        hex_addr, hex_port = parts[1].split(":")
        addr = ".".join(str(int(hex_addr[i:i + 2], 16)) for i in (6, 4, 2, 0))
        found.add((addr, int(hex_port, 16)))
    return found


def log_head(path: Path, size_bytes: int = LOG_SCAN_BYTES) -> str:
    """A dead daemon's reason comes first in its output (the cause, then the teardown)."""
    with open(path, "rb") as log:
        return log.read(size_bytes).decode(errors="replace")
