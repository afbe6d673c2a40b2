"""The Android UE agent: role "ue" on a phone, through the real adb client.

UE_CONTRACT (fetch, iperf3_client, signal) plus phone operations (phone_info, prepare, tcpdump_start /
tcpdump_stop and set_cc on rooted phones). Every run (fetch, iperf3_client) keeps a 1 Hz signal log
(<tag>-signal.jsonl, the mobility replay's drive-log format) and publishes each reading as `signal`
telemetry. The serial is the operator's (--serial), checked against `adb devices` at start.
"""

from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from cellab.bus import Agent, OperationFailed, operation
from cellab.contracts import implements
from cellab.contracts.health import CheckItem, SelfCheckResult, clock_sync_check, fail, ok, warn
from cellab.contracts.ue import (
    CC_PATTERN,
    TAG_PATTERN,
    UE_CONTRACT,
    FetchRequest,
    FetchResult,
    Iperf3ClientParams,
    Iperf3ClientResult,
    ProbeFetchParams,
    RadioParams,
    RadioResult,
    SignalReading,
)
from cellab.errors import CellabError
from cellab.paths import find_program
from cellab.ue.probe_runner import fetch_argv
from cellab.ue.ue_provenance import AndroidProvenance

from .adbclient import DEFAULT_PORT, Adb, PhoneError, PhoneGone
from .phone import DEVICE_DIR, PROBE_DEVICE_PATH, Phone, PhoneInfo
from .signallog import SignalLogger

PROBE_AARCH64 = "cellab-probe-aarch64"
# `settings get global KEY`: what a phone on the lab's cell must show ("1" on, "0" off), and why
CELL_SETTINGS = (("wifi_on", "0", "Wi-Fi", "on: the phone's traffic would bypass the cell", "svc wifi disable"),
                 ("mobile_data", "1", "mobile data", "off: no traffic reaches the cell", "svc data enable"),
                 ("airplane_mode_on", "0", "airplane mode", "on: the modem is off",
                  "cmd connectivity airplane-mode disable"))


class _Params(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PrepareParams(_Params):
    airplane_toggle: bool = Field(True, description="airplane mode on then off: a fresh attach")
    airplane_hold_s: float = Field(2.0, ge=0, le=60)
    mobile_data: bool = True
    wifi_off: bool = True
    stay_awake: bool = True
    screen_on: bool = True


class PrepareResult(BaseModel):
    steps: list[str]
    signal: SignalReading | None = None


class TcpdumpParams(_Params):
    interface: str = Field("any", pattern=r"^[A-Za-z0-9_.:-]{1,15}$")
    snaplen_bytes: int = Field(128, ge=64, le=65535)
    tag: str = Field("run", pattern=TAG_PATTERN)


class ArtifactsResult(BaseModel):
    artifacts: list[str]


class CcParams(_Params):
    cc: str = Field(pattern=CC_PATTERN)


@implements(UE_CONTRACT)
class AndroidUEAgent(AndroidProvenance, Agent):
    role = "ue"

    def __init__(self, *args: Any, serial: str | None = None, adb_port: int | None = None, adb: str = "adb",
                 probe_binary: Path | None = None, signal_period_s: float = 1.0, netns: str | None = None,
                 cell_ctl: str | None = None, cell_ue: int = 0, **kwargs: Any):
        if not serial:
            raise CellabError("the android UE agent needs --serial (see `adb devices -l`)")
        if netns or cell_ctl:  # a phone runs its workloads itself and reads its own modem
            raise CellabError("--netns and --cell-ctl are for the virtual UE; an android UE runs on its phone")
        self.adb = Adb(adb_port, adb)
        self.phone = Phone(self.adb, serial)  # discovery: an unknown serial is an InputError, before connecting
        super().__init__(*args, **kwargs)
        self.probe_binary = probe_binary
        self.signal_period_s = signal_period_s
        self._probe_pushed = False
        self._children: list[subprocess.Popen] = []
        self._loggers: list[SignalLogger] = []
        self._tcpdump: dict[str, str] = {}  # tag -> device pcap path
        self._lock = threading.Lock()

    # --- helpers --------------------------------------------------------------------------------
    def _fail(self, exc: CellabError) -> OperationFailed:
        return OperationFailed(str(exc))

    def _need_root(self, what: str) -> None:
        if not self.phone.info.rooted:
            raise OperationFailed(f"{self.phone.label}: {what} needs a rooted phone (su); this one is not rooted")

    def _signal_log(self, tag: str) -> SignalLogger:
        def publish(reading: SignalReading) -> None:
            self.publish("signal", reading.model_dump())
            self.set_ue_state("in", f"{self.phone.label}: serving cell pci {reading.pci}")

        def no_service(why: str) -> None:  # no LTE serving cell: out (coverage, radio off), the agent alive
            self.set_ue_state("out", why)

        logger = SignalLogger(self._reading, self.artifact_dir / f"{tag}-signal.jsonl",
                              period_s=self.signal_period_s, on_sample=publish, on_error=no_service)
        self._loggers.append(logger)
        return logger.start()

    def _end_log(self, logger: SignalLogger) -> None:
        logger.stop()
        if logger in self._loggers:
            self._loggers.remove(logger)

    # --- phone operations -----------------------------------------------------------------------
    @operation(concurrent=True)
    def phone_info(self) -> PhoneInfo:
        """What discovery found: serial, model, Android and kernel versions, ABI, root, iperf3."""
        return self.phone.info

    @operation
    def prepare(self, params: PrepareParams) -> PrepareResult:
        """Screen on, stay awake, Wi-Fi off, mobile data on, airplane toggle (a fresh attach)."""
        try:
            steps = self.phone.prepare(**params.model_dump())
        except CellabError as exc:
            raise self._fail(exc) from None
        try:
            reading: SignalReading | None = self.phone.signal()
        except CellabError:
            reading = None  # still attaching: the caller reads `signal` when it needs it
        return PrepareResult(steps=steps, signal=reading)

    @operation(concurrent=True)
    def set_radio(self, params: RadioParams) -> RadioResult:
        """Off: airplane mode on (the modem leaves the cell, as out of coverage); on: off again (it attaches anew)."""
        try:
            self.phone.set_airplane(not params.on)
        except CellabError as exc:
            raise self._fail(exc) from None
        return RadioResult(on=params.on, how=f"{self.phone.label}: airplane mode {'off' if params.on else 'on'}")

    @operation
    def self_check(self) -> SelfCheckResult:
        """Read-only: the phone still there, the probe build (here and on the phone), Wi-Fi off, mobile data
        on, airplane mode off, the host clock. `prepare` fixes the phone's settings."""
        if not self.adb.present(self.phone.serial):
            return SelfCheckResult(items=[fail("phone", f"{self.phone.label} is not in `adb devices` (unplugged, "
                                                        "rebooting or unauthorized)"), clock_sync_check()])
        items = [ok("phone", self.phone.label), self._probe_check()]
        items += [self._setting_check(*setting) for setting in CELL_SETTINGS]
        return SelfCheckResult(items=[*items, clock_sync_check()])

    def _probe_check(self) -> CheckItem:
        try:
            built = self.probe_binary or find_program(PROBE_AARCH64)
        except CellabError:
            return fail("probe", f"{PROBE_AARCH64} is not built on this host: run `make build` (the agent pushes "
                                 "it to the phone)")
        try:
            on_phone = self.phone.sh("ls", PROBE_DEVICE_PATH).code == 0
        except CellabError as exc:
            return fail("probe", f"{self.phone.label}: {exc}")
        where = f"on the phone at {PROBE_DEVICE_PATH}" if on_phone else "pushed to the phone at the first run"
        return ok("probe", f"{built}, {where}")

    def _setting_check(self, key: str, wanted: str, what: str, why: str, fix: str) -> CheckItem:
        try:
            value = self.phone.sh_ok("settings", "get", "global", key).strip()
        except CellabError as exc:
            return warn(what, f"the phone does not report it: {exc}")
        if value == wanted:
            return ok(what, "on" if value == "1" else "off")
        return fail(what, f"{why}; `cellab doctor --lab LAB --fix` (the agent's prepare) or "
                          f"`{self._adb_hint()} shell {fix}`")

    def _adb_hint(self) -> str:
        """The adb command line a person types for this phone: with -P when its server is not on adb's default."""
        port = "" if self.adb.port == DEFAULT_PORT else f" -P {self.adb.port}"
        return f"adb{port} -s {self.phone.serial}"

    @operation(concurrent=True)
    def signal(self) -> SignalReading:
        """The serving LTE cell's RSRP, RSSNR (as sinr_db), RSRQ, CQI, EARFCN, PCI from dumpsys."""
        try:
            return self._reading()
        except CellabError as exc:
            raise self._fail(exc) from None

    def _reading(self) -> SignalReading:
        """The phone's signal stamped with the agent's clock as the read began (the op's answer and the run's
        signal log alike): a run's start waits for one after its set, its telemetry is filed at that moment."""
        taken_s = self._clock()
        return self.phone.signal().model_copy(update={"t_s": taken_s})

    @operation
    def set_cc(self, params: CcParams) -> PhoneInfo:
        """The phone's TCP congestion control (sysctl, rooted phones only)."""
        self._need_root("setting the congestion control")
        try:
            self.phone.sh_ok("sysctl", "-w", f"net.ipv4.tcp_congestion_control={params.cc}", root=True)
        except CellabError as exc:
            raise self._fail(exc) from None
        return self.phone.info

    @operation
    def tcpdump_start(self, params: TcpdumpParams) -> ArtifactsResult:
        """Capture on the phone (rooted only) until tcpdump_stop with the same tag."""
        self._need_root("tcpdump")
        remote = f"{DEVICE_DIR}/{params.tag}-phone.pcap"
        try:
            self.phone.sh_ok("mkdir", "-p", DEVICE_DIR)
            proc = self.adb.popen_shell(self.phone.serial, ["su", "0", "tcpdump", "-i", params.interface, "-s",
                                                             str(params.snaplen_bytes), "-U", "-w", remote],
                                        stdout=subprocess.DEVNULL)
        except CellabError as exc:
            raise self._fail(exc) from None
        self._children.append(proc)
        self._tcpdump[params.tag] = remote
        return ArtifactsResult(artifacts=[])

    @operation
    def tcpdump_stop(self, params: TcpdumpParams) -> ArtifactsResult:
        remote = self._tcpdump.pop(params.tag, None)
        if remote is None:
            raise OperationFailed(f"{self.phone.label}: no capture running with tag {params.tag!r}",
                                  field="params.tag")
        local = self.artifact_dir / PurePosixPath(remote).name
        try:
            self.phone.sh("pkill", "-INT", "tcpdump", root=True)
            time.sleep(0.5)  # tcpdump flushes its buffer on SIGINT
            self.phone.pull(remote, local)
        except CellabError as exc:
            raise self._fail(exc) from None
        return ArtifactsResult(artifacts=[local.name])

    # --- the ue contract ------------------------------------------------------------------------
    def _ensure_probe(self) -> None:
        if self._probe_pushed:
            return
        binary = self.probe_binary or find_program(PROBE_AARCH64)
        self.phone.sh_ok("mkdir", "-p", DEVICE_DIR)
        self.phone.push(binary, PROBE_DEVICE_PATH)
        self._probe_pushed = True

    @operation
    def fetch(self, params: ProbeFetchParams) -> FetchResult:
        """cellab-probe (aarch64) on the phone with the run's receiver control; artifacts pulled back."""
        request = FetchRequest(**params.model_dump(exclude={"tag"}))
        argv, files = fetch_argv(request, Path(DEVICE_DIR), params.tag, Path(PROBE_DEVICE_PATH))
        logger = self._signal_log(params.tag)
        pulled: list[str] = [logger.path.name]
        try:
            self._ensure_probe()
            self.phone.sh("rm", "-f", *(str(p) for p in files.values()))
            last_start_s = max(f.start_ms for f in request.flows) / 1000
            budget_s = request.timeout_s + last_start_s + 2 * request.sr_probes * 0.3 + 30
            run = self.phone.sh(*argv, timeout_s=budget_s)
            for remote in files.values():
                local = self.artifact_dir / remote.name
                try:
                    self.phone.pull(str(remote), local)
                    pulled.append(local.name)
                except PhoneGone:
                    raise
                except PhoneError:
                    continue  # a log the probe did not write (it says why in its summary)
        except PhoneGone as exc:
            self._probe_pushed = False  # a phone that comes back may have rebooted
            raise OperationFailed(f"{exc}; kept: {', '.join(pulled)}") from None
        except CellabError as exc:
            raise self._fail(exc) from None
        finally:
            self._end_log(logger)
        summary_name = files["summary"].name
        if summary_name not in pulled:
            raise OperationFailed(f"{self.phone.label}: cellab-probe wrote no summary (exit {run.code}): "
                                  f"{run.stderr.strip()[-300:]}")
        summary = json.loads((self.artifact_dir / summary_name).read_text())
        if summary.get("status") == "error":
            errors = "; ".join(summary.get("errors") or ["unknown error"])
            raise OperationFailed(f"{self.phone.label}: probe fetch failed: {errors} (summary: {summary_name})")
        return FetchResult(status=summary.get("status", "error"), artifacts=sorted(pulled), summary=summary)

    @operation
    def iperf3_client(self, params: Iperf3ClientParams) -> Iperf3ClientResult:
        """iperf3 from the phone (when it has one) with a concurrent ping; artifacts as on the virtual UE."""
        if not self.phone.info.iperf3:
            raise OperationFailed(f"{self.phone.label}: no iperf3 on this phone (not on its PATH); "
                                  "use the probe workload (tool: probe) instead")
        iperf_path = self.artifact_dir / f"{params.tag}-iperf3.json"
        ping_path = self.artifact_dir / f"{params.tag}-ping.txt"
        words = ["iperf3", "-c", params.server, "-p", str(params.port), "-t", f"{params.duration_s:g}",
                 "-P", str(params.flows), "-C", params.cc, "-J", "--get-server-output", "--connect-timeout", "3000"]
        if params.direction == "download":
            words.append("-R")
        logger = self._signal_log(params.tag)
        pinger = None
        started = time.monotonic()
        try:
            if params.ping_interval_ms is not None:
                # Android's ping refuses intervals below 200 ms without root
                with open(ping_path, "w") as ping_out:
                    pinger = self.adb.popen_shell(self.phone.serial, [
                        "ping", "-D", "-n", "-i", f"{max(params.ping_interval_ms, 200) / 1000:g}",
                        "-w", f"{params.duration_s:g}", params.server], stdout=ping_out)
                self._children.append(pinger)
            result = self.phone.sh(*words, timeout_s=params.duration_s + 30)
            iperf_path.write_text(result.stdout)
        except CellabError as exc:
            raise self._fail(exc) from None
        finally:
            if pinger is not None:
                try:
                    pinger.wait(params.duration_s + 5)
                except subprocess.TimeoutExpired:
                    pinger.kill()
            self._end_log(logger)
        if result.code != 0:
            raise OperationFailed(f"{self.phone.label}: iperf3 exited with {result.code}: "
                                  f"{(result.stdout + result.stderr).strip()[-300:]}")
        artifacts = [iperf_path.name, logger.path.name] + ([ping_path.name] if pinger else [])
        return Iperf3ClientResult(artifacts=artifacts, elapsed_s=time.monotonic() - started)

    # --- safe state -----------------------------------------------------------------------------
    def safe_state(self) -> None:
        """Stop our adb children and signal logs; stop what we started on the phone if it is there."""
        for logger in list(self._loggers):
            self._end_log(logger)
        for proc in self._children:
            if proc.poll() is None:
                proc.kill()
        self._children.clear()
        if self.adb.present(self.phone.serial):
            self.phone.sh("pkill", "-TERM", "cellab-probe")
            if self.phone.info.rooted and self._tcpdump:
                self.phone.sh("pkill", "-INT", "tcpdump", root=True)
        self._tcpdump.clear()
        super().safe_state()
