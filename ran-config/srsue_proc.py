"""One srsue over ZMQ, supervised by the srsran-zmq lab: ue.conf rendered from the run's settings, started
(argv list, no shell) inside the stack's namespace with its TUN put into the UE namespace, attach detected on
its console ("Network attach successful. ... IP: a.b.c.d"), stopped politely then firmly.

srsue does not use SCTP: no LD_PRELOAD shim.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from cellab.envvars import lab_log_max_bytes
from cellab.errors import CellabError
from cellab.labs.proc import ManagedProcess

from . import logbound
from .srsenb_proc import BIN_ENV
from .ue_events import RrcEventTail

ATTACH_RE = re.compile(r"Network attach successful\..*IP: (\d+\.\d+\.\d+\.\d+)")
_ERROR_RE = re.compile(r"^(error|failed|couldn't|cannot|could not|.*Attach failed|.*Attach Reject)", re.I)
TUN_NAME = "tun_srsue"
# the srsRAN example USIM (public test values; the matching subscriber row is rendered for srsEPC)
TEST_USIM = {"imsi": "001010123456780", "k": "00112233445566778899aabbccddeeff",
             "opc": "63bfa50ee6523365ff14c1f45f88737d", "imei": "353490069873319"}
#: The UE's DL noise floor (srsue AWGN channel emulator, always on): the SNR srsue measures with the eNB's
#: cell_gain at 0 dB. The eNB's cell_gain moves the signal against it, so SNR = REF_SNR_DB - attenuation_db.
REF_SNR_DB = 30.0
#: srsue's `awgn.snr` sets noise relative to `awgn.signal_power` (0 dBfs), not to the ZMQ signal: measured here,
#: srsue reports dl_snr = ZMQ_SNR_OFFSET_DB + awgn.snr - attenuation_db (awgn.snr 20, cell_gain -10: 77 dB;
#: awgn.snr 10, cell_gain -20: 57 dB; RSRP 60/50/40 at cell_gain 0/-10/-20); without noise 141 dB
ZMQ_SNR_OFFSET_DB = 67.0
STOP_GRACE_S = 3.0  # srsue without its eNB blocks in ZMQ and ignores SIGTERM; its attach state is not kept


def _luhn_digit(digits: str) -> str:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = int(c) * (2 if i % 2 == 0 else 1)
        total += d - 9 if d > 9 else d
    return str((10 - total % 10) % 10)


def ue_usim(index: int) -> dict[str, str]:
    """UE `index`'s USIM: UE 0 the srsRAN example values, UE i the next IMSI with its own K, OPc and IMEI
    (the last byte of K and OPc moved by i; the IMEI's serial by i, with its Luhn check digit)."""
    if index == 0:
        return dict(TEST_USIM)
    base = TEST_USIM
    k = base["k"][:-2] + f"{(int(base['k'][-2:], 16) - index) % 256:02x}"
    opc = base["opc"][:-2] + f"{(int(base['opc'][-2:], 16) + index) % 256:02x}"
    imei14 = f"{int(base['imei'][:14]) + index:014d}"
    return {"imsi": f"{int(base['imsi']) + index:015d}", "k": k, "opc": opc, "imei": imei14 + _luhn_digit(imei14)}


class SrsueError(CellabError):
    """srsue could not be found, started, or did not attach; the message carries its own console line."""


@dataclass(frozen=True)
class UeSettings:
    """What srsue is started with (a change restarts it)."""

    dl_earfcn: int = 3350
    n_prb: int = 25  # srsue reads the cell's PRBs from the MIB; kept so an eNB change restarts the UE too
    ref_snr_db: float = REF_SNR_DB
    base_srate_hz: float = 23.04e6  # the ZMQ stream's rate: srsenb's rf.device base_srate_hz

    def awgn_snr_setting(self) -> float:
        """srsue's `channel.dl.awgn.snr` that gives ref_snr_db at 0 dB attenuation."""
        return self.ref_snr_db - ZMQ_SNR_OFFSET_DB


def find_srsue(bin_dir: str | Path | None = None) -> Path:
    searched: list[str] = []
    for folder in filter(None, [str(bin_dir) if bin_dir else None, os.environ.get(BIN_ENV)]):
        cand = Path(folder) / "srsue"
        searched.append(str(cand))
        if cand.is_file() and os.access(cand, os.X_OK):
            return cand.resolve()
    on_path = shutil.which("srsue")
    searched.append("PATH")
    if on_path:
        return Path(on_path).resolve()
    raise SrsueError("srsue not found; searched: " + "; ".join(searched) + f" (set {BIN_ENV} or install srsRAN 4G)")


def render_ue_conf(s: UeSettings, ue_netns: str, log_path: Path, metrics_path: Path | None = None,
                   tx_port: int = 2001, rx_port: int = 2000, index: int = 0, log_max_kib: int = -1) -> str:
    """UE `index` (its USIM, ZMQ id); tx_port is bound, rx_port is srsenb's (or the broker's) tx; log_max_kib:
    srsue's log split in files of that size (-1: one file; cellab.ran.logbound)."""
    metrics_path = metrics_path or log_path.with_name("srsue_metrics.csv")
    channel = (f"[channel.dl]\nenable = true\n[channel.dl.awgn]\nenable = true\nsnr = {s.awgn_snr_setting():g}\n"
               "signal_power = 0\n")
    u = ue_usim(index)
    return (
        "# rendered by cellab.ran.srsue_proc (the srsran-zmq lab)\n"
        "[rf]\nfreq_offset = 0\ntx_gain = 80\ndevice_name = zmq\n"
        f"device_args = tx_port=tcp://*:{tx_port},rx_port=tcp://localhost:{rx_port},id=ue{index},"
        f"base_srate={s.base_srate_hz / 1e6:g}e6\n"
        f"[rat.eutra]\ndl_earfcn = {s.dl_earfcn}\n"
        "[pcap]\nenable = none\n"
        f"[log]\nall_level = warning\nrrc_level = info\nrrc_hex_limit = 0\nphy_lib_level = none\nall_hex_limit = 32\nfilename = {log_path}\n"
        f"file_max_size = {int(log_max_kib)}\n"
        f"[usim]\nmode = soft\nalgo = milenage\nopc = {u['opc']}\nk = {u['k']}\nimsi = {u['imsi']}\nimei = {u['imei']}\n"
        f"[gw]\nnetns = {ue_netns}\nip_devname = {TUN_NAME}\n"
        "[gui]\nenable = false\n"
        f"[general]\nmetrics_csv_enable = true\nmetrics_period_secs = 1\nmetrics_csv_filename = {metrics_path}\n"
        "metrics_csv_flush_period_sec = 1\n" + channel)


class SrsueProcess:
    """srsue started in `netns` (where srsenb's ZMQ ports are), its TUN in `ue_netns`."""

    def __init__(self, binary: Path, work_dir: Path, settings: UeSettings, *, netns: str | None, ue_netns: str,
                 index: int = 0, ports: tuple[int, int] = (2000, 2001)):
        """ports: (rx, tx) ZMQ ports (the lab's broker's; srsenb's own 2000/2001 by default)."""
        self.binary, self.work_dir, self.settings = binary, work_dir, settings
        self.index, self.ports = index, ports
        self.netns, self.ue_netns = netns, ue_netns
        self.console = work_dir / "srsue_console.log"
        self.log = work_dir / "srsue.log"
        self.metrics = work_dir / "srsue_metrics.csv"  # per second: rsrp, snr, cqi, mcs, rates (srsue's CSV)
        self.rrc = RrcEventTail(self.log, index)  # its RRC events, read as its split log grows
        self.console_tail = ConsoleTail(self.console)  # its attaches and RNTI, read as its console grows
        self.proc: ManagedProcess | None = None
        self.started_s: float | None = None

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        conf = self.work_dir / "ue.conf"
        self.metrics.unlink(missing_ok=True)
        logbound.remove_all(self.log)  # a new srsue writes its log afresh, split within the lab's bound
        self.rrc = RrcEventTail(self.log, self.index)
        self.console_tail = ConsoleTail(self.console)
        conf.write_text(render_ue_conf(self.settings, self.ue_netns, self.log, self.metrics,
                                       rx_port=self.ports[0], tx_port=self.ports[1], index=self.index,
                                       log_max_kib=logbound.file_max_size_kib(lab_log_max_bytes())))
        # cwd: srsue writes its NAS context (.ctxt) where it runs
        self.proc = ManagedProcess([str(self.binary), str(conf)], self.console, netns=self.netns, cwd=conf.parent)
        self.started_s = time.time()

    def running(self) -> bool:
        return self.proc is not None and self.proc.running()

    def console_text(self) -> str:
        """Its console's first line and latest CONSOLE_TEXT_BYTES (the lab frees its middle beyond the bound)."""
        try:
            return logbound.head_and_tail(self.console, CONSOLE_TEXT_BYTES).decode(errors="replace")
        except OSError:
            return ""

    def attached_ip(self) -> str | None:
        """The IP of its last attach (None before its first)."""
        return self.console_tail.poll().ip

    def attach_count(self) -> int:
        """How many times it attached since it started."""
        return self.console_tail.poll().attaches

    def rnti(self) -> str | None:
        """The C-RNTI (hex) of its last random access."""
        return self.console_tail.poll().rnti

    def error_line(self) -> str | None:
        for line in self.console_text().splitlines():
            if _ERROR_RE.match(line.strip()):
                return line.strip()[:300]
        return None

    def wait_attached(self, timeout_s: float) -> str:
        """The UE's IP once srsue printed its attach; SrsueError naming srsue's own line otherwise."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            ip = self.attached_ip()
            if ip:
                return ip
            if not self.running():
                code = self.proc.proc.returncode if self.proc else None
                raise SrsueError(f"srsue exited (code {code}) before attaching: "
                                 f"{self.error_line() or self._tail()}")
            time.sleep(0.2)
        raise SrsueError(f"srsue did not attach within {timeout_s:g} s: {self.error_line() or self._tail()}")

    def _tail(self) -> str:
        lines = [line.strip() for line in self.console_text().splitlines() if line.strip()]
        return " | ".join(lines[-3:]) if lines else f"(no output; console {self.console})"

    def bound_logs(self, max_bytes: int) -> None:
        """Its files kept within max_bytes each (every few seconds while it runs: the srsran-zmq lab's pruner):
        its log read on (RRC events kept, read segments pruned), its console read on (attaches, IP, C-RNTI), then
        the middle of its console and its metrics CSV freed (cellab.ran.logbound)."""
        self.rrc.events()
        self.console_tail.poll()
        for path in (self.console, self.metrics):
            logbound.free_middle(path, max_bytes)

    def stop(self, grace_s: float = STOP_GRACE_S) -> None:
        if self.proc is not None:
            self.proc.stop(grace_s=grace_s)


RNTI_RE = re.compile(r"Random Access Complete\.\s+c-rnti=0x([0-9a-fA-F]+)")
CONSOLE_TEXT_BYTES = 1 << 20  # what an error line or the last lines are looked for in


class ConsoleTail:
    """srsue's console read as it grows, the zeros of a freed middle skipped: its attaches counted, its latest IP
    and C-RNTI, since srsue started. Read by the lab's pruner before it frees the console's middle
    (logbound.free_middle), so the count and the latest values survive the bound."""

    def __init__(self, path: Path):
        self.path, self._offset, self._partial = path, 0, b""
        self.attaches, self.ip, self.rnti = 0, None, None
        self._lock = threading.Lock()

    def poll(self) -> ConsoleTail:
        with self._lock:
            try:
                with open(self.path, "rb") as f:
                    f.seek(self._offset)
                    data = f.read()
            except OSError:
                data = b""  # not written yet
            self._offset += len(data)
            lines = (self._partial + data).split(b"\n")
            self._partial = lines.pop()
            for raw in lines:
                line = raw.replace(b"\0", b"").decode(errors="replace")
                if attach := ATTACH_RE.search(line):
                    self.attaches, self.ip = self.attaches + 1, attach.group(1)
                if rnti := RNTI_RE.search(line):
                    self.rnti = rnti.group(1)
        return self
#: srsue's metrics CSV columns kept in a UE's telemetry, and their names there
UE_TELEMETRY_FIELDS = {"rsrp": "rsrp", "dl_snr": "dl_snr_db", "dl_mcs": "dl_mcs", "dl_brate": "dl_bitrate_bps",
                       "dl_bler": "dl_bler", "ul_mcs": "ul_mcs", "ul_brate": "ul_bitrate_bps", "ul_bler": "ul_bler",
                       "is_attached": "attached"}


def write_ue_telemetry(ue: SrsueProcess, name: str, since_s: float, folder: Path) -> Path | None:
    """srsue's per-second metrics since `since_s` as the run's telemetry of UE `name` (<folder>/<name>.jsonl,
    beside what the runner recorded from the agents), with the C-RNTI srsue got (the eNB's ue_metrics key).
    srsue's `time` column counts ms from its own start of metrics: placed on the wall clock from the file's
    last write (flushed every second, so within about a second)."""
    if not ue.metrics.exists():
        return None
    text = logbound.head_and_tail(ue.metrics, lab_log_max_bytes()).decode(errors="replace")  # middle freed
    rows = [line.split(";") for line in text.splitlines() if line.strip()]
    rows = [row for row in rows if len(row) == len(rows[0])]  # not a line cut by srsue's write in progress
    if len(rows) < 2 or "time" not in rows[0]:
        return None
    header, end_s = rows[0], ue.metrics.stat().st_mtime
    rnti = int(ue.rnti(), 16) if ue.rnti() else None
    try:
        last_ms = float(rows[-1][header.index("time")])
    except (ValueError, IndexError):
        return None
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.jsonl"
    with open(path, "a") as out:
        for row in rows[1:]:
            values = dict(zip(header, row, strict=True))
            try:
                t_s = end_s - (last_ms - float(values["time"])) / 1000.0
                fields = {new: float(values[old]) for old, new in UE_TELEMETRY_FIELDS.items() if old in values}
            except ValueError:
                continue
            if t_s >= since_s:
                out.write(json.dumps({"t_s": t_s, "topic": "srsue_metrics", "ue": name, "rnti": rnti} | fields)
                          + "\n")
    return path
