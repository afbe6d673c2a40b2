"""The core agent (`cellab agent --role core`): renders a profile, runs the flavour's daemons as processes,
reports health, and keeps each run's configuration and logs as artifacts (`core-runs/NNN/`).

Daemons run as child processes of the agent (argv lists, optionally in a network namespace), not through
the packages' systemd units: those read fixed files under /etc, and a run's files are its own. A daemon
that exits at start fails `start` with its own last error line."""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from cellab.bus import Agent, OperationFailed, operation
from cellab.contracts import implements
from cellab.contracts.core import (
    CORE_CONTRACT,
    ConfigureParams,
    ConfigureResult,
    CoreSelfCheckParams,
    CoreStatus,
    DaemonState,
    KillParams,
    KillResult,
    StartParams,
)
from cellab.contracts.health import CheckItem, SelfCheckResult, clock_sync_check, fail, ok, warn
from cellab.errors import CellabError, from_validation_error
from cellab.labs.proc import ManagedProcess

from .daemons import Daemon, clean, daemons_for, listening, log_head, start_error_line, version_of
from .logbound import CoreLogs
from .profile import CoreProfile, flavour_problems
from .provenance import CoreProvenance
from .render import render

PORT_WAIT_S = 5.0
DB_CONNECT_TIMEOUT_S = 2.0
DB_HOST_PORT = re.compile(r"^mongodb://(?:[^@/]*@)?(?P<host>\[[^\]]+\]|[^,:/]+)(?::(?P<port>\d+))?")
DB_START_S = 15.0  # a db_local FerretDB listening
KILL_REAP_S = 5.0  # a SIGKILLed daemon is gone at once; the wait only covers a host stalled for seconds
KILLED_LINE = "killed by the core agent's kill operation (SIGKILL)"
# Open5GS installed elsewhere than the packages (bin/, lib/, etc/ of one folder, e.g. the shared bundle)
OPEN5GS_DIR_ENV = "CELLAB_OPEN5GS_DIR"
OPEN5GS_BUNDLE = Path(__file__).resolve().parents[1].parent / "shared" / "tools" / "open5gs"
# the MME's one-to-one SCTP over the srsRAN shim's wire format (the bundle's lib/), on kernels without SCTP
OPEN5GS_SCTP_SHIM = "lib/sctp1to1shim.so"
UPF_TUN = "ogstun"  # the UPF's default session device (Open5GS does not address it on Linux)


def open5gs_prefix() -> Path | None:
    """Where Open5GS is when it is not installed by the packages: $CELLAB_OPEN5GS_DIR, else the shared bundle
    (../shared/tools/open5gs) unless open5gs-mmed is on PATH; None: the packages' programs and /etc files."""
    named = os.environ.get(OPEN5GS_DIR_ENV)
    if named:
        return Path(named).resolve()
    if shutil.which("open5gs-mmed"):
        return None
    return OPEN5GS_BUNDLE if (OPEN5GS_BUNDLE / "bin" / "open5gs-mmed").is_file() else None


def kernel_has_sctp() -> bool:
    return Path("/proc/net/sctp").exists()


@implements(CORE_CONTRACT)
class CoreAgent(CoreProvenance, Agent):
    role = "core"

    def __init__(self, *args: Any, netns: str | None = None, programs: dict[str, str] | None = None,
                 env: dict[str, str] | None = None, **kwargs: Any):
        """programs: daemon program name -> path (default: found on PATH / build/bin);
        env: extra environment for the daemons (default: LD_PRELOAD=$CELLAB_CORE_LD_PRELOAD when set, the
        SCTP shim a kernel without SCTP needs for the MME / srsEPC)."""
        super().__init__(*args, **kwargs)
        if env is None and os.environ.get("CELLAB_CORE_LD_PRELOAD"):
            env = {"LD_PRELOAD": os.environ["CELLAB_CORE_LD_PRELOAD"]}
        self.netns, self.programs, self.env = netns, dict(programs or {}), dict(env or {})
        self._lock = threading.Lock()
        self._flavour: str | None = None
        self._profile: CoreProfile | None = None
        self._run_dir: Path | None = None
        self._logs: CoreLogs | None = None  # the run's daemon logs, read and bounded (logbound.py)
        self._daemons: list[Daemon] = []
        self._procs: dict[str, ManagedProcess] = {}
        self._errors: dict[str, str] = {}
        self._reported: set[str] = set()
        self._secrets: Path | None = None
        self._subscribers: list[Any] = []  # Open5GS/NextEPC: provisioned at start (in memory only: K, OPc)
        self._o5_prefix: Path | None = None
        self._tun_made = False
        self._version = ""

    # ----- operations ---------------------------------------------------------------------------
    @operation
    def configure(self, params: ConfigureParams) -> ConfigureResult:
        from pydantic import ValidationError

        from cellab.inputs import parse_yaml

        from .subscribers import parse_subscribers, srsepc_csv

        if any(self._alive().values()):
            raise OperationFailed("daemons are running: stop them before configuring a new run")
        try:  # the input layer's guards: nesting, aliases, duplicate keys, numbers that do not fit
            data = parse_yaml(params.profile_yaml, "profile_yaml")
            profile = CoreProfile.model_validate(data)
        except CellabError as exc:
            raise OperationFailed(str(exc).replace("\n", "; "), field="params.profile_yaml") from None
        except ValidationError as exc:
            raise OperationFailed(str(from_validation_error("profile_yaml", exc)).replace("\n", "; "),
                                  field="params.profile_yaml") from None
        flavour = params.flavour or profile.flavour
        problems = flavour_problems(profile, flavour)
        if problems:
            raise OperationFailed(f"profile_yaml: flavour {flavour}: " + "; ".join(problems), field="params.flavour")
        csv_text, subscribers = None, []
        if params.subscribers_csv:
            # parsed from the text itself: K and OPc never touch the artifacts, not even for a moment
            try:
                subscribers = parse_subscribers(params.subscribers_csv, "subscribers_csv", profile=profile,
                                                flavour=flavour)
                csv_text = srsepc_csv(subscribers) if flavour == "srsepc" else None
            except CellabError as exc:
                raise OperationFailed(f"subscribers_csv: {exc}".replace("\n", "; "),
                                      field="params.subscribers_csv") from None
        from cellab.envvars import lab_log_max_bytes

        try:
            log_max_bytes = lab_log_max_bytes()
        except CellabError as exc:
            raise OperationFailed(str(exc)) from None
        run_dir = self._new_run_dir()
        config_dir, logs = run_dir / "config", run_dir / "logs"
        logs.mkdir(parents=True)
        profile = profile.model_copy(update={"log_dir": str(logs.resolve())})
        # srsEPC's user_db.csv holds K and OPc: it lives in a private folder, never among the artifacts
        user_db = self._secrets_dir() / f"user_db-{run_dir.name}.csv" if flavour == "srsepc" else None
        o5_prefix = self._open5gs_prefix() if flavour == "open5gs" else None
        try:
            files = render(profile, flavour, config_dir, subscribers_csv=csv_text, user_db=user_db,
                           open5gs_prefix=o5_prefix)
        except CellabError as exc:  # a value the files cannot carry (the artifact folder's own path, say)
            raise OperationFailed(str(exc), field="params.profile_yaml") from None
        with self._lock:
            self._flavour, self._profile, self._run_dir = flavour, profile, run_dir
            if self._logs is not None:
                self._logs.stop()
            self._logs = CoreLogs(logs, log_max_bytes)
            self._daemons = daemons_for(flavour, profile)
            self._procs, self._errors, self._reported = {}, {}, set()
            self._subscribers = subscribers if flavour != "srsepc" else []
            self._o5_prefix, self._version = o5_prefix, ""
        return ConfigureResult(flavour=flavour, run_dir=str(run_dir.relative_to(self.artifact_dir)),
                               files=[str(f.relative_to(run_dir)) for f in files],
                               daemons=[d.name for d in self._daemons])

    # `start`/`stop` are the Agent's own lifecycle methods: the operations keep the contract's names
    @operation(name="start")
    def start_daemons(self, params: StartParams) -> CoreStatus:
        if self._run_dir is None:
            raise OperationFailed("not configured: call configure first")
        known = {d.name: d for d in self._daemons}
        wanted = params.daemons or list(known)
        unknown = [n for n in wanted if n not in known]
        if unknown:
            raise OperationFailed(f"unknown daemons {unknown}", field="params.daemons", allowed=list(known))
        for daemon in self._daemons:
            if daemon.name in wanted and not (daemon.name in self._procs and self._procs[daemon.name].running()):
                if self._subscribers and daemon.name != "db":
                    self._provision()  # before the HSS reads them
                if daemon.name == "upf":
                    self._ensure_tun()
                self._launch(daemon)
                self._said(daemon.name, "started", self._procs[daemon.name].proc.pid)
                if daemon.name == "db":
                    self._wait_db(daemon)
        deadline, waiting = time.monotonic() + params.settle_s, list(wanted)  # waiting: not yet seen listening
        while time.monotonic() < deadline:
            if any(not self._procs[n].running() for n in wanted):
                break
            waiting = self._listening_now(waiting)
            time.sleep(0.05)
        dead = [n for n in wanted if not self._procs[n].running()]
        if dead:
            lines = []
            for name in dead:
                self._errors[name] = start_error_line(log_head(self._procs[name].log_path))
                lines.append(f"{name} exited at start (code {self._procs[name].proc.poll()}): {self._errors[name]}")
            raise OperationFailed("; ".join(lines))
        self._wait_ports(waiting)
        return self._status()

    @operation(name="stop")
    def stop_daemons(self) -> CoreStatus:
        for name in reversed([d.name for d in self._daemons]):
            proc = self._procs.get(name)
            if proc is not None:
                proc.stop(grace_s=5.0)
        self._remove_tun()
        return self._status()

    @operation
    def kill(self, params: KillParams) -> KillResult:
        """One daemon SIGKILLed, as a crash (no shutdown of its own: its peers are told nothing), and reaped;
        `start` starts it again (it starts only the daemons not running)."""
        if self._run_dir is None:
            raise OperationFailed("not configured: call configure first")
        known = [d.name for d in self._daemons]
        if params.daemon not in known:
            raise OperationFailed(f"unknown daemon {params.daemon!r} for flavour {self._flavour}",
                                  field="params.daemon", allowed=known)
        proc = self._procs.get(params.daemon)
        if proc is None or not proc.running():
            running = [n for n in known if n in self._procs and self._procs[n].running()]
            raise OperationFailed(f"{params.daemon} is not running: nothing to kill", field="params.daemon",
                                  allowed=running)
        began = time.monotonic()
        os.kill(proc.proc.pid, signal.SIGKILL)  # the agent's own child: the daemon itself (argv, no shell)
        try:
            code: int | None = proc.wait(KILL_REAP_S)
        except subprocess.TimeoutExpired:
            code = None
        self._errors[params.daemon] = KILLED_LINE
        self._said(params.daemon, "killed", proc.proc.pid)
        return KillResult(daemon=params.daemon, pid=proc.proc.pid, exit_code=code,
                          waited_s=round(time.monotonic() - began, 3))

    @operation(concurrent=True)
    def status(self) -> CoreStatus:
        return self._status()

    @operation
    def self_check(self, params: CoreSelfCheckParams) -> SelfCheckResult:
        """Read-only: every daemon of the flavour installed, its database answering (Open5GS, NextEPC: the
        profile's db_uri; srsEPC reads its subscribers from the inventory), the host clock."""
        profile = self._self_check_profile(params)
        if isinstance(profile, CheckItem):
            return SelfCheckResult(items=[profile, clock_sync_check()])
        items = [self._program_check(daemon) for daemon in daemons_for(params.flavour, profile)]
        if params.flavour != "srsepc":
            items.append(self._database_check(profile.db_uri if params.profile_yaml else None))
        return SelfCheckResult(items=[*items, clock_sync_check()])

    @staticmethod
    def _self_check_profile(params: CoreSelfCheckParams) -> CoreProfile | CheckItem:
        """The profile sent, or the defaults (the daemons' programs do not depend on it)."""
        from pydantic import ValidationError

        from cellab.inputs import parse_yaml

        if params.profile_yaml is None:
            return CoreProfile.model_construct()
        try:
            return CoreProfile.model_validate(parse_yaml(params.profile_yaml, "profile_yaml"))
        except (CellabError, ValidationError) as exc:
            return fail("profile", f"the inventory's core profile does not load here: {str(exc)[:300]}")

    def _program_check(self, daemon: Daemon) -> CheckItem:
        try:
            return ok(daemon.program, self._program(daemon))
        except OperationFailed as exc:
            return fail(daemon.program, f"{exc}: install the core (docs/real-lab.md, core host)")

    @staticmethod
    def _database_check(db_uri: str | None) -> CheckItem:
        if db_uri is None:
            return warn("database", "no core profile in the inventory: its db_uri was not tried")
        match = DB_HOST_PORT.match(db_uri)
        if match is None:
            return fail("database", f"cannot read a host from db_uri {db_uri}")
        host, port = match.group("host").strip("[]"), int(match.group("port") or 27017)
        try:
            socket.create_connection((host, port), timeout=DB_CONNECT_TIMEOUT_S).close()
        except OSError as exc:
            return fail("database", f"{host}:{port} ({db_uri.split('@')[-1]}) does not answer: {exc}; start "
                                    "MongoDB (or `cellab core db up`)")
        return ok("database", f"{host}:{port} answers")

    def safe_state(self) -> None:
        for proc in self._procs.values():
            proc.stop(grace_s=3.0)
        self._remove_tun()

    def stop(self) -> None:
        """The agent's end: daemons stopped, the private folder of subscriber files removed."""
        super().stop()
        if self._logs is not None:
            self._logs.stop()
        if self._secrets is not None:
            shutil.rmtree(self._secrets, ignore_errors=True)

    # ----- helpers ------------------------------------------------------------------------------
    def _secrets_dir(self) -> Path:
        if self._secrets is None:
            self._secrets = Path(tempfile.mkdtemp(prefix=f"cellab-{self.name}-secrets-"))  # mode 0700
        return self._secrets

    def _new_run_dir(self) -> Path:
        base = self.artifact_dir / "core-runs"
        base.mkdir(parents=True, exist_ok=True)
        number = 1 + max((int(p.name) for p in base.iterdir() if p.name.isdigit()), default=0)
        run_dir = base / f"{number:03d}"
        run_dir.mkdir()
        return run_dir

    def _open5gs_prefix(self) -> Path | None:
        if any(p.startswith("open5gs-") for p in self.programs):
            return None  # programs named one by one: the packages' layout
        return open5gs_prefix()

    def _program(self, daemon: Daemon) -> str:
        # configured: the run's Open5GS; else (self_check) where configure would find it
        prefix = self._o5_prefix if self._run_dir is not None else self._open5gs_prefix()
        if prefix is not None and daemon.program.startswith("open5gs-"):
            path = prefix / "bin" / daemon.program
            if not os.access(path, os.X_OK):
                raise OperationFailed(f"{daemon.name}: program {path} is not installed")
            return str(path)
        if daemon.program in self.programs:
            path = self.programs[daemon.program]
            if not os.access(path, os.X_OK):
                raise OperationFailed(f"{daemon.name}: program {path} is not installed")
            return path
        from cellab.paths import find_program

        try:
            return str(find_program(daemon.program))
        except CellabError:
            raise OperationFailed(f"{daemon.name}: program {daemon.program} is not installed") from None

    def _launch(self, daemon: Daemon) -> None:
        assert self._run_dir is not None
        config_dir = self._run_dir / "config"
        data_dir = self._secrets_dir() / f"{daemon.name}-{self._run_dir.name}"  # mode 0700 folder: K, OPc
        argv = daemon.argv(self._program(daemon), config_dir.resolve(), data_dir)
        env = self._env_for(daemon)
        if env:  # `env` is argv too: no shell
            argv = ["env", *(f"{k}={v}" for k, v in env.items()), *argv]
        log = self._run_dir / "logs" / f"{daemon.name}.out"
        self._procs[daemon.name] = ManagedProcess(argv, log, netns=self.netns)
        self._errors.pop(daemon.name, None)
        assert self._logs is not None  # Open5GS and NextEPC reopen their log on SIGHUP; srsEPC ends on one
        self._logs.watch(daemon.name, lambda: self._pid(daemon.name), reopens=self._flavour != "srsepc")
        self._logs.start()

    def _pid(self, name: str) -> int | None:
        proc = self._procs.get(name)
        return proc.proc.pid if proc is not None and proc.running() else None

    def _env_for(self, daemon: Daemon) -> dict[str, str]:
        """The agent's environment for the daemons; for Open5GS the SCTP shim is the MME's own (one-to-one
        sockets: the bundle's sctp1to1shim.so, which speaks the srsRAN shim's wire format), and no other
        Open5GS daemon gets one (their Diameter runs over TCP)."""
        if self._flavour != "open5gs" or self._o5_prefix is None or kernel_has_sctp():
            return dict(self.env)
        env = {k: v for k, v in self.env.items() if k != "LD_PRELOAD"}
        if daemon.name == "mme":
            env["LD_PRELOAD"] = str(self._o5_prefix / OPEN5GS_SCTP_SHIM)
        return env

    def _wait_db(self, daemon: Daemon) -> None:
        """The run's FerretDB listening, or the start fails with its own line."""
        proc = self._procs[daemon.name]
        deadline = time.monotonic() + DB_START_S
        while time.monotonic() < deadline:
            if not proc.running():
                self._errors[daemon.name] = start_error_line(log_head(proc.log_path))
                raise OperationFailed(f"db exited at start (code {proc.proc.poll()}): {self._errors[daemon.name]}")
            if all(listening(daemon.ports, proc.proc.pid).values()):
                return
            time.sleep(0.1)
        raise OperationFailed(f"db: FerretDB did not listen on {', '.join(listening(daemon.ports).keys())} within "
                              f"{DB_START_S:.0f} s")

    def _provision(self) -> None:
        """The run's subscribers into the profile's database, in Open5GS's (or NextEPC's) schema, once."""
        from .provision import provision_in

        assert self._profile is not None and self._flavour is not None
        try:
            provision_in(self.netns, self._profile.db_uri, self._flavour, self._subscribers)
        except CellabError as exc:
            raise OperationFailed(f"subscribers: {exc}") from None
        self._subscribers = []

    def _ip(self, *argv: str) -> subprocess.CompletedProcess:
        from cellab.labs.netns import in_netns

        full = ["ip", *argv]
        return subprocess.run(in_netns(self.netns, full) if self.netns else full, capture_output=True, text=True,
                              timeout=10, check=False)

    def _ensure_tun(self) -> None:
        """Open5GS's UPF opens its session device but does not address it on Linux: ogstun made (when absent)
        with the UE subnet's gateway, and up."""
        assert self._profile is not None
        if self._ip("link", "show", UPF_TUN).returncode != 0:
            made = self._ip("tuntap", "add", "name", UPF_TUN, "mode", "tun")
            if made.returncode != 0:
                raise OperationFailed(f"upf: cannot create TUN {UPF_TUN}: {made.stderr.strip()[:300]}")
            self._tun_made = True
        for step in (("addr", "replace", f"{self._profile.gateway}/{self._profile.ue_prefix_len}", "dev", UPF_TUN),
                     ("link", "set", UPF_TUN, "up")):
            done = self._ip(*step)
            if done.returncode != 0:
                raise OperationFailed(f"upf: ip {' '.join(step)}: {done.stderr.strip()[:300]}")

    def _remove_tun(self) -> None:
        if self._tun_made:
            self._ip("link", "del", UPF_TUN)
            self._tun_made = False

    def _alive(self) -> dict[str, bool]:
        return {name: proc.running() for name, proc in self._procs.items()}

    def _wait_ports(self, names: list[str]) -> None:
        deadline = time.monotonic() + PORT_WAIT_S
        while names and time.monotonic() < deadline:
            names = self._listening_now(names)
            time.sleep(0.05)

    def _listening_now(self, names: list[str]) -> list[str]:
        """Those of `names` not yet listening where they must; the others said `listening` (telemetry) now."""
        ports = {d.name: d.ports for d in self._daemons}
        up = [n for n in names if all(listening(ports[n], self._procs[n].proc.pid).values())]
        for name in up:
            self._said(name, "listening", self._procs[name].proc.pid)
        return [n for n in names if n not in up]

    def _status(self) -> CoreStatus:
        if self._run_dir is None:
            return CoreStatus(flavour=None, run_dir="", daemons=[], ok=False, problems=["not configured"])
        states, problems = [], []
        for daemon in self._daemons:
            proc = self._procs.get(daemon.name)
            if proc is None:
                states.append(DaemonState(name=daemon.name, running=False))
                continue
            running = proc.running()
            code = proc.proc.poll()
            if not running and daemon.name not in self._errors:
                self._errors[daemon.name] = start_error_line(log_head(proc.log_path))
            ports = listening(daemon.ports, proc.proc.pid) if running else {}
            error = "" if running else self._errors.get(daemon.name, "")
            states.append(DaemonState(name=daemon.name, running=running, pid=proc.proc.pid, exit_code=code,
                                      error=error, ports=ports,
                                      log=str(proc.log_path.relative_to(self.artifact_dir))))
            if not running and code not in (0, -15, None):
                problems.append(f"{daemon.name} exited (code {code}): {error}")
                self._report(daemon.name, "exited", error)
            problems += [f"{daemon.name} does not listen on {where}" for where, ok in ports.items() if not ok]
        findings = self._logs.findings() if self._logs is not None else []
        problems += [f"{f.daemon}: {f.kind}: {f.line}" for f in findings if f.kind in
                     ("imsi_unknown", "s1_setup_failure", "sqn_error", "auth_failure", "db_error")]
        started = [s for s in states if s.pid is not None]
        ok = bool(started) and all(s.running for s in started) and not problems
        return CoreStatus(flavour=self._flavour, run_dir=str(self._run_dir.relative_to(self.artifact_dir)),
                          daemons=states, ok=ok, problems=problems, findings=findings, version=self._daemon_version())

    def _daemon_version(self) -> str:
        """What the daemons say they are (their first lines), once one has said it."""
        if not self._version and self._flavour is not None:
            for daemon in self._daemons:
                proc = self._procs.get(daemon.name)
                if daemon.name != "db" and proc is not None and proc.log_path.exists():
                    text = "\n".join(clean(line) for line in log_head(proc.log_path, 8192).splitlines())
                    self._version = version_of(text, self._flavour)
                    if self._version:
                        break
        return self._version

    def _said(self, daemon: str, state: str, pid: int) -> None:
        """A daemon's step as `core_daemon` telemetry (killed, started, listening): a fault's recovery reads them."""
        self.publish("core_daemon", {"daemon": daemon, "state": state, "pid": pid})

    def _report(self, daemon: str, kind: str, line: str) -> None:
        key = f"{daemon}:{kind}:{line}"
        if key not in self._reported:
            self._reported.add(key)
            self.publish("core.event", {"daemon": daemon, "kind": kind, "line": line})

