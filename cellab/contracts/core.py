"""The core (EPC) role: configure a flavour from a profile, start/stop its daemons, report health.

Implemented by the core room (`cellab.epc.agent:CoreAgent`, entry point `core.epc`). The profile travels
as YAML text and is validated by the agent with the room's own model; nothing in it is run as a command."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from cellab.contracts.base import Contract, Empty, Model, Op, RoleClient
from cellab.contracts.health import SelfCheckResult

CoreFlavour = Literal["open5gs", "open5gs-2.6", "nextepc", "srsepc"]
MAX_PROFILE_BYTES = 64_000


class ConfigureParams(Model):
    profile_yaml: str = Field(max_length=MAX_PROFILE_BYTES, description="a core profile (YAML text)")
    flavour: CoreFlavour | None = Field(None, description="default: the profile's")
    subscribers_csv: str | None = Field(None, max_length=MAX_PROFILE_BYTES,
                                        description="srsepc: subscribers (CSV/YAML text) for user_db.csv")


class ConfigureResult(Model):
    flavour: CoreFlavour
    run_dir: str = Field(description="this run's folder, relative to the agent's artifacts")
    files: list[str] = Field(description="rendered files, relative to run_dir")
    daemons: list[str]


class StartParams(Model):
    daemons: list[str] | None = Field(None, description="a subset of the configured flavour's daemons; default all")
    settle_s: float = Field(2.0, ge=0, le=60, description="how long a daemon must stay up to count as started")


#: a core_daemon fault's daemon (cellab.faults.spec.CORE_DAEMONS) -> the core agent's name for it, where they differ
#: (srsEPC is one process, the agent's daemon `epc`)
AGENT_DAEMON = {"srsepc": "epc"}


def agent_daemon(daemon: str) -> str:
    """The core agent's name of a core_daemon fault's daemon."""
    return AGENT_DAEMON.get(daemon, daemon)


class KillParams(Model):
    daemon: str = Field(max_length=32, description="one of the configured flavour's daemons (configure's `daemons`)")


class KillResult(Model):
    daemon: str
    pid: int = Field(description="the process that was killed")
    exit_code: int | None = Field(description="as reaped (-9), None if it was not reaped within the wait")
    waited_s: float = Field(description="from the signal to the reaped exit")


class DaemonState(Model):
    name: str
    running: bool
    pid: int | None = None
    exit_code: int | None = None
    error: str = Field("", description="the daemon's own last error line when it exited")
    ports: dict[str, bool] = Field(default_factory=dict, description="'proto addr:port' -> listening")
    log: str = Field("", description="its log, relative to the agent's artifacts")


class LogFinding(Model):
    daemon: str
    kind: Literal["imsi_unknown", "s1_setup_failure", "sqn_error", "auth_failure", "db_error", "attach_ok", "error"]
    line: str


class CoreStatus(Model):
    flavour: CoreFlavour | None
    run_dir: str
    daemons: list[DaemonState]
    ok: bool = Field(description="every started daemon runs and listens where it should")
    problems: list[str] = Field(default_factory=list)
    findings: list[LogFinding] = Field(default_factory=list)
    version: str = Field("", description="what the daemons say they are, e.g. 'Open5GS v2.7.7', 'srsEPC 23.04.0' "
                                         "('' until one has said it)")


class CoreSelfCheckParams(Model):
    flavour: CoreFlavour = Field(description="the inventory's flavour: which daemons must be installed")
    profile_yaml: str | None = Field(None, max_length=MAX_PROFILE_BYTES,
                                     description="the core profile (its db_uri names the database to reach)")


class CoreEvent(Model):
    """Telemetry `core.event`: a daemon exited, or a log line worth a person's attention."""

    daemon: str
    kind: str
    line: str


CONFIGURE = Op("configure", ConfigureParams, ConfigureResult, "render the flavour's files into a new run folder")
START = Op("start", StartParams, CoreStatus, "start the daemons; a daemon that exits at start is named with its error")
STOP = Op("stop", Empty, CoreStatus, "stop every daemon (SIGTERM, then SIGKILL)")
KILL = Op("kill", KillParams, KillResult, "SIGKILL one running daemon (a crash, for a fault); `start` starts it "
          "again")
STATUS = Op("status", Empty, CoreStatus, "processes, ports and log findings")
SELF_CHECK = Op("self_check", CoreSelfCheckParams, SelfCheckResult,
                "read-only: the flavour's daemons installed, its database answering, the host clock")

CORE_CONTRACT = Contract("core", (CONFIGURE, START, STOP, KILL, STATUS, SELF_CHECK), {"core.event": CoreEvent})


class CoreClient(RoleClient):
    contract = CORE_CONTRACT

    def configure(self, params: ConfigureParams) -> ConfigureResult:
        return self.call(CONFIGURE, params)

    def start(self, params: StartParams | None = None) -> CoreStatus:
        return self.call(START, params or StartParams(), timeout_s=max(self.timeout_s, 90.0))

    def stop(self) -> CoreStatus:
        return self.call(STOP, Empty(), timeout_s=max(self.timeout_s, 30.0))

    def kill(self, daemon: str) -> KillResult:
        return self.call(KILL, KillParams(daemon=daemon))

    def status(self) -> CoreStatus:
        return self.call(STATUS, Empty())

    def self_check(self, params: CoreSelfCheckParams, timeout_s: float | None = None) -> SelfCheckResult:
        return self.call(SELF_CHECK, params, timeout_s)
