"""cellab-zmq-broker (broker/zmq_broker.c) supervised by the srsran-zmq lab when it runs several UEs: srsenb's
ZMQ ports stay 2000 (tx) / 2001 (rx), the broker sits on them and serves UE i on ports 2100+2i (its rx) and
2101+2i (its tx). Ready on its "ready" line; its stats lines (JSON, sample rates moved) stay in its log. A UE's
gains, its downlink copy's and its uplink's weight in what srsenb hears, change while the stream runs through its
stdin (`gain I DB`, `ul_gain I DB`, answered in its log): set_gain. Its stack clock (broker/clock.c: when each
TTI's last sample passed, per direction) is recorded per run into a folder (`clock_start RUN_ID DIR`, `clock_stop`
on its stdin): clock_start / clock_stop; SIGTERM (stop) writes the rest too. When
srsenb's connection drops (a crash, the enb_restart fault) the UEs hear silence paced at the cell's sample rate
(`srate_hz`) until a new srsenb takes the ports: its `enb_lost` / `enb_back` lines (`events`)."""

from __future__ import annotations

import json
import math
import threading
import time
from pathlib import Path

from cellab.errors import CellabError, InputError
from cellab.paths import find_program
from cellab.labs.proc import ManagedProcess

from . import logbound

ENB_TX_PORT, ENB_RX_PORT = 2000, 2001  # the eNB profile's rf.device ports
UE_PORT_BASE = 2100
READY_TIMEOUT_S = 5.0
STATS_PERIOD_S = 2.0
LOG_READ_BYTES = 64 << 20  # a day of stats lines is about 2 MB
GAIN_REPLY_TIMEOUT_S = 2.0
MIN_GAIN_DB, MAX_GAIN_DB = -100.0, 100.0  # the broker's own bounds (broker/broker.h)
GAIN_COMMANDS = {"dl": ("gain", "dl_gain_db"), "ul": ("ul_gain", "ul_gain_db")}  # link -> stdin command, reply key


def ue_ports(index: int) -> tuple[int, int]:
    """(rx, tx) ZMQ ports of UE `index` when the broker is between it and srsenb."""
    return UE_PORT_BASE + 2 * index, UE_PORT_BASE + 2 * index + 1


def broker_argv(binary: Path, n_ues: int, dl_gains_db: list[float] | None = None,
                srate_hz: float | None = None, ul_gains_db: list[float] | None = None) -> list[str]:
    """dl_gains_db: UE i's downlink copy scaled by dl_gains_db[i] dB (-100..100; per-UE attenuation); ul_gains_db:
    UE i's uplink in srsenb's sum scaled so; srate_hz: the cell's sample rate, the pace of the silence the UEs hear
    while srsenb is gone."""
    local = "tcp://127.0.0.1:{}".format
    argv = [str(binary), "--enb-tx", local(ENB_TX_PORT), "--enb-rx", local(ENB_RX_PORT),
            "--stats-s", str(STATS_PERIOD_S)]
    if srate_hz:
        argv += ["--srate-hz", f"{srate_hz:g}"]
    for i in range(n_ues):
        rx, tx = ue_ports(i)
        dl_db = dl_gains_db[i] if dl_gains_db else 0.0
        ul_db = ul_gains_db[i] if ul_gains_db else 0.0
        argv += ["--ue", f"rx={local(rx)},tx={local(tx)}" + (f",dl_gain_db={dl_db:g}" if dl_db else "")
                 + (f",ul_gain_db={ul_db:g}" if ul_db else "")]
    return argv


class BrokerProcess:
    """One broker in the stack's namespace (where srsenb's and the UEs' ZMQ ports are)."""

    def __init__(self, work_dir: Path, n_ues: int, *, netns: str | None, dl_gains_db: list[float] | None = None,
                 srate_hz: float | None = None, ul_gains_db: list[float] | None = None):
        self.work_dir, self.n_ues, self.netns, self.srate_hz = work_dir, n_ues, netns, srate_hz
        self.dl_gains_db = list(dl_gains_db) if dl_gains_db else [0.0] * n_ues
        self.ul_gains_db = list(ul_gains_db) if ul_gains_db else [0.0] * n_ues
        self.log = work_dir / "zmq_broker.log"
        self.proc: ManagedProcess | None = None
        self._command_lock = threading.Lock()  # one gain command and its reply at a time

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        argv = broker_argv(find_program("cellab-zmq-broker"), self.n_ues, self.dl_gains_db, self.srate_hz,
                           self.ul_gains_db)
        self.proc = ManagedProcess(argv, self.log, netns=self.netns, commands=True)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.text().startswith("ready"):
                return
            if not self.running():
                raise CellabError(f"ZMQ broker exited at start (code {self.exit_code()}): {self.last_line()}")
            time.sleep(0.05)
        raise CellabError(f"ZMQ broker not ready within {READY_TIMEOUT_S:g} s: {self.last_line()}")

    def running(self) -> bool:
        return self.proc is not None and self.proc.running()

    def exit_code(self) -> int | None:
        return self.proc.proc.poll() if self.proc else None

    def text(self) -> str:
        return self._text_from(0)

    def _text_from(self, offset: int) -> str:
        """Its log from byte `offset`; from the start: its first line and latest LOG_READ_BYTES, as the lab frees
        the middle of a long-lived broker's log (cellab.ran.logbound.free_middle)."""
        try:
            if offset == 0:
                return logbound.head_and_tail(self.log, LOG_READ_BYTES).decode(errors="replace")
            with open(self.log, "rb") as log:
                log.seek(offset)
                return log.read().replace(b"\0", b"").decode(errors="replace")
        except OSError:
            return ""

    def last_line(self) -> str:
        """Its error line if it wrote one, else how it ended (a signal) and what it last waited for."""
        errors = [line.strip() for line in self.text().splitlines() if line.startswith("cellab-zmq-broker:")]
        if errors:
            return errors[-1][:300]
        code = self.exit_code()
        how = f"killed by signal {-code}" if code is not None and code < 0 else f"exit code {code}, no error line"
        rates = self.rates()
        if rates:
            how += (f"; it last moved {rates[-1].get('dl_msps')} Msps DL, waiting for "
                    f"{rates[-1].get('dl_waits_for')} (DL) and {rates[-1].get('ul_waits_for')} (UL)")
        return how + f" (log {self.log})"

    def rates(self) -> list[dict[str, float]]:
        """Its stats lines: {t_s, dl_msps, ul_msps, dl_blocks, ul_blocks, silent_blocks, enb_losses} every
        STATS_PERIOD_S (dl_msps: srsenb's samples only; silent_blocks: zero blocks while srsenb was gone)."""
        return [row for row in self._json_lines() if "dl_msps" in row]

    def events(self) -> list[dict[str, float | str]]:
        """Its event lines: {event: enb_lost | enb_back, wall_s, dl_sample, enb_losses}."""
        return [row for row in self._json_lines() if isinstance(row.get("event"), str)]

    def _json_lines(self, offset: int = 0) -> list[dict]:
        """Its JSON lines from byte `offset` of its log on."""
        out = []
        for line in self._text_from(offset).splitlines():
            if line.startswith("{"):
                try:
                    row = json.loads(line)
                except ValueError:  # a line cut by a kill
                    continue
                if isinstance(row, dict):
                    out.append(row)
        return out

    def set_gain(self, ue: int, gain_db: float, link: str = "dl") -> None:
        """UE `ue`'s downlink copy (link "dl") or its uplink in srsenb's sum (link "ul") at gain_db from that
        direction's next block on, once the broker confirmed it."""
        if link not in GAIN_COMMANDS:
            raise InputError("ZMQ broker gain", "link", f"{link!r} is not a direction", sorted(GAIN_COMMANDS))
        if not (0 <= ue < self.n_ues and math.isfinite(gain_db) and MIN_GAIN_DB <= gain_db <= MAX_GAIN_DB):
            raise CellabError(f"ZMQ broker: {link} gain {gain_db!r} dB for UE {ue}: UE 0..{self.n_ues - 1}, "
                              f"gain {MIN_GAIN_DB:g}..{MAX_GAIN_DB:g} dB")
        command, key = GAIN_COMMANDS[link]
        reply = self._command(f"{command} {ue} {gain_db:.3f}", lambda row: "gain_ue" in row,
                              f"{link} gain {gain_db:g} dB for UE {ue}")
        if key not in reply:
            raise CellabError(f"ZMQ broker refused {link} gain {gain_db:g} dB for UE {ue}: {reply}")
        (self.dl_gains_db if link == "dl" else self.ul_gains_db)[ue] = gain_db

    def clock_start(self, run_id: str, folder: Path) -> dict:
        """The stack clock recorded from now into folder/stack-clock-{dl,ul}.bin under run_id (the previous
        recording, if any, complete on disk first): {"clock": "started", "run_id", "dl_first_tti", "ul_first_tti"}.
        Needs the broker started with the cell's srate_hz."""
        return self._command(f"clock_start {run_id} {Path(folder).resolve()}", lambda row: "clock" in row,
                             f"clock_start {run_id}")

    def clock_stop(self) -> dict:
        """The recording's rest written and its files closed: {"clock": "stopped", "run_id", "dl_ttis",
        "ul_ttis"} (a write that failed: "dl_error" / "ul_error" instead of the count)."""
        return self._command("clock_stop", lambda row: "clock" in row, "clock_stop")

    def _command(self, line: str, is_reply, what: str) -> dict:
        """One stdin command and its JSON reply (the first line after it that is_reply accepts, or an error line)."""
        with self._command_lock:
            offset = self.log.stat().st_size if self.log.exists() else 0  # its answer comes after what is there
            if self.proc is None or not self.proc.send_line(line):
                raise CellabError(f"ZMQ broker not running: {self.last_line()}")
            deadline = time.monotonic() + GAIN_REPLY_TIMEOUT_S
            while time.monotonic() < deadline:
                new = [row for row in self._json_lines(offset) if is_reply(row) or "error" in row]
                if new:
                    if "error" in new[0]:
                        raise CellabError(f"ZMQ broker refused {what}: {new[0]['error']}")
                    return new[0]
                time.sleep(0.01)
        raise CellabError(f"ZMQ broker did not answer {what} within {GAIN_REPLY_TIMEOUT_S:g} s: {self.last_line()}")

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(grace_s=1.0)
