"""The `srsran-zmq` lab: the real srsRAN 4G stack over ZMQ on this machine, driven through the same agents a
hardware lab uses (`enb` = cellab.ran.agent, `core` = the core room's srsEPC agent), srsue supervised here.

    <p>-srv  eth0 10.201.0.2 --veth-- srv0 10.201.0.1  <p>-core: srsepc (SGi srs_spgw_sgi 172.16.0.1),
                                                           srsenb, the ZMQ broker, the srsue (ZMQ on its lo)
    <p>-ue0  tun_srsue 172.16.0.2 (srsue puts its TUN here: [gw] netns)
    <p>-ueI  tun_srsue 172.16.0.(2+I), with several UEs (`ues`, up to MAX_UES)

The lab's units: this file (namespaces, the core, configure, what crashed, down), zmqlab_params (the run
parameters), zmqlab_attach (the broker and srsue started, every UE attached), zmqlab_run (the run's record: the
stack clock, timing, ground truth, collect), zmqlab_attenuation, zmqlab_faults.

The radio: cellab-zmq-broker (broker/zmq_broker.c, zmq_broker.py) takes srsenb's ZMQ ports 2000/2001 and
serves UE i on 2100+2i / 2101+2i (DL copied to every UE, UL summed), also with one UE (one code path); each UE
its own USIM (srsue_proc.ue_usim), subscriber row and static IP. The ZMQ stream runs at the cell's own sample
rate (base_srate = the n_prb's rate: no 4x resampling in srsenb and every srsue, a quarter of the bytes).

S1 (through the bundle's SCTP shim: abstract AF_UNIX sockets), GTP-U and ZMQ all stay inside <p>-core, so
nothing of the stack touches the root namespace. The lab holds the host lock /tmp/cellab-srsran.lock (cellab.hostlock) from `up` to `down`
(one srsRAN stack per machine).

Attenuation (anchors §1.6): over ZMQ the eNB's `cell_gain` moves RSRP but not SINR (there is no noise), so
srsue runs its DL AWGN channel emulator as a fixed noise floor (30 dB SNR at 0 dB, srsue_proc.REF_SNR_DB) and
a run's attenuation_db is `cell_gain -attenuation_db` against it: RSRP and SNR both drop dB for dB, and a new
attenuation needs no restart. Each UE's own attenuation beyond it is the broker's gain on that UE's downlink,
changed while the stream runs, so the lab's attenuator (a Mini-Circuits serial emulator, as on the virtual lab)
plays schedules, mobility replays and radio outages per UE: zmqlab_attenuation. The same dB scale each UE's uplink
in the broker (a passive box attenuates both ways) against srsenb's own uplink noise floor (its AWGN channel
emulator, rendered into enb.conf), so srsenb's PUSCH SINR falls with the UE's attenuation too.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

import yaml

from cellab.hostlock import SRSRAN_LOCK, HostLock, HostLockTimeout, acquire
from cellab.contracts.core import ConfigureParams as CoreConfigureParams
from cellab.contracts.core import CoreClient
from cellab.contracts.enb import ConfigureParams, EnbClient, RadioOverrides
from cellab.envvars import env_seconds, lab_log_max_bytes
from cellab.errors import CellabError, InputError
from cellab.labs import instances, netns
from cellab.labs.base import AgentSpec, EmbeddedLab, Host, Topology
from cellab.periodic import Periodic

from . import logbound
from .srsue_proc import REF_SNR_DB, SrsueProcess
from .uhd_args import SAMPLE_RATE_HZ
from .zmq_broker import BrokerProcess
from .zmqlab_attenuation import (ATTENUATOR_MAX_DB, RECONNECT_WAIT_S, AttenuationControl, UeRadio, enb_ul_awgn,
                                 ue_attenuations)
from .zmqlab_attach import SERVER_ADDR, StackAttach
from .zmqlab_faults import FAULT_DAEMONS, StackFaults
from .zmqlab_provenance import ZmqLabProvenance
from .zmqlab_params import (CORE_ENV, CORE_PROFILE, CORE_PROFILES, ENB_PROFILE, MAX_ATTENUATION_DB, RESTART_FIELDS,
                            ZmqLabParams, default_core, srsran_bin_dir, subscribers_csv, ue_addr, validate_params)
from .zmqlab_run import RunRecords

# the lab's parameters live in zmqlab_params; these names stay importable from here
__all__ = ["CORE_ENV", "SrsranZmqLab", "ZmqLabParams", "default_core", "srsran_bin_dir", "subscribers_csv",
           "validate_params"]

LOCK_TIMEOUT_ENV = "CELLAB_SRSRAN_LOCK_TIMEOUT_S"
STATE_ROOT = Path("/run/cellab")
CORE_SIDE_ADDR, LINK_PREFIX = "10.201.0.1", 24
CELL_ID = 1  # the example profile's cell
ENB_READY_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 20.0
MAX_UES = 4


class SrsranZmqLab(ZmqLabProvenance, RunRecords, StackAttach, StackFaults, UeRadio, EmbeddedLab):
    kind = "srsran-zmq"
    params_model = ZmqLabParams
    max_ues = MAX_UES  # several: through cellab-zmq-broker
    telemetry_lag_s = 3.5  # srsenb's JSON report reaches its agent up to ~3 s after its timestamp
    snr_at_0db_attenuation_db = REF_SNR_DB  # srsue's AWGN floor against cell_gain -attenuation_db
    cell_attenuator = True  # the broker's per-UE gains behind a serial emulator: zmqlab_attenuation
    attenuator_max_db = ATTENUATOR_MAX_DB
    # radio_outage: the attenuator's maximum, recovery from srsue's own RRC events; sgi_cut, s1_cut (S1-U's
    # GTP-U discarded by policy rules), core_daemon (one daemon of the run's core killed and restarted through the
    # core agent), enb_restart (srsenb killed and started again through its agent, the UEs kept on the broker):
    # zmqlab_faults
    fault_kinds = frozenset({"radio_outage", "sgi_cut", "s1_cut", "core_daemon", "enb_restart"})
    fault_daemons = frozenset(FAULT_DAEMONS)  # with some core; each run's: run_fault_daemons (its `core`)

    def __init__(self, prefix: str = "czq", bin_dir: str | Path | None = None, ues: int = 1):
        if isinstance(ues, bool) or not isinstance(ues, int) or not 1 <= ues <= MAX_UES:
            raise InputError("srsran-zmq lab", "ues", f"{ues!r} is not a UE count", [f"1..{MAX_UES}"])
        self.n_ues = ues
        self.prefix = instances.check_prefix(prefix, "srsran-zmq lab")
        self._bin_dir = Path(bin_dir) if bin_dir else None
        self.state_dir = STATE_ROOT / f"srsran-{self.prefix}"
        self.controller: Any = None
        self.lab_agents: dict[str, str] = {}
        self._lock: HostLock | None = None
        self._ues: list[SrsueProcess] = []
        self._broker: BrokerProcess | None = None  # between srsenb and every srsue
        self._applied: ZmqLabParams | None = None
        self._cell_att_db: float | None = None  # the attenuation all UEs share: the eNB's cell_gain
        self._ue_att_db: list[float] = [0.0] * ues  # each UE's: beyond the cell's, the broker's gain on its downlink
        self._attenuation: AttenuationControl | None = None  # the attenuator bridge's peer
        self._log_pruner: Periodic | None = None  # each srsue's log and metrics within the lab's bound
        self._lab_events: list[dict[str, Any]] = []  # attenuation the broker applied, SGi cuts: with their wall time
        self._enb_restarts = 0
        self._enb_params: ConfigureParams | None = None  # the run's srsenb configuration (an enb_restart's restart)
        self._console_offsets: list[int] = []
        self._configured_at_s = 0.0
        self._broker_t_at = -1.0  # the broker's last stats line before the run (its t_s: timing_faults reads after)
        self._effective: dict[str, dict[str, Any]] = {}  # per UE, the SR pattern the eNB saw this run
        self._ues_started = False  # since up(): a later restart also restarts srsEPC
        self.core_flavour: str | None = None  # the EPC running (srsepc | open5gs)
        self.core_version = ""  # what its daemons say they are
        self.subscribers_text: str | None = None  # None: every UE's row (subscribers_csv); tests may leave one out
        self.last_attach_s: float | None = None  # configure → attached, of the last (re)attach
        self.last_configure: dict[str, Any] = {}
        self.lock_wait_s = 0.0  # how long up() waited for another srsRAN stack to finish

    # ---- names --------------------------------------------------------------------------------
    @property
    def core_ns(self) -> str:
        return f"{self.prefix}-core"

    @property
    def ue_ns(self) -> str:
        return self.ue_ns_of(0)

    def ue_ns_of(self, index: int) -> str:
        return f"{self.prefix}-ue{index}"

    @property
    def srv_ns(self) -> str:
        return f"{self.prefix}-srv"

    @property
    def bin_dir(self) -> Path:
        if self._bin_dir is None:
            self._bin_dir = srsran_bin_dir()
        return self._bin_dir

    def topology(self) -> Topology:
        ues = tuple(Host(f"ue{i}", self.ue_ns_of(i), ue_addr(i)) for i in range(self.n_ues))
        return Topology(server=Host("server", self.srv_ns, SERVER_ADDR), ues=ues,
                        extra={"core_netns": self.core_ns, "srsran_bin": str(self.bin_dir),
                               "attenuation_ctl": self.attenuation_endpoint})

    @property
    def attenuation_endpoint(self) -> str:
        return f"ipc://{self.state_dir}/attenuation.ctl"

    # ---- lifecycle ----------------------------------------------------------------------------
    def up(self) -> Topology:
        netns.require_root("the srsran-zmq lab")
        self.bin_dir  # noqa: B018  (fail before touching anything)
        for path in (ENB_PROFILE, CORE_PROFILE):
            if not path.is_file():
                raise CellabError(f"srsran-zmq lab: {path} is missing")
        self._take_lock()
        try:
            self.claim_instance()
            self._remove()
            self.state_dir.mkdir(parents=True, exist_ok=True)
            os.chmod(self.state_dir, 0o700)
            self._log_pruner = logbound.pruner(self._bound_ue_logs)
            for name in (self.core_ns, self.srv_ns, *map(self.ue_ns_of, range(self.n_ues))):
                netns.create(name)
            netns.veth(self.core_ns, "srv0", self.srv_ns, "eth0")
            netns.address(self.core_ns, "srv0", f"{CORE_SIDE_ADDR}/{LINK_PREFIX}")
            netns.address(self.srv_ns, "eth0", f"{SERVER_ADDR}/{LINK_PREFIX}")
            netns.default_route(self.srv_ns, CORE_SIDE_ADDR)
            netns.sysctl(self.core_ns, "net.ipv4.ip_forward", "1")
            self.prepare_s1_cut()
            self._attenuation = AttenuationControl(self.attenuation_endpoint, self.n_ues, self.set_ue_attenuation,
                                                   lambda ue: self._ue_att_db[ue])
        except BaseException:
            self.down()
            raise
        return self.topology()

    def _bound_ue_logs(self) -> None:
        """Each srsue's log read on (its RRC events kept, its read segments pruned), its metrics CSV's, its
        console's and the broker's log's middle freed beyond the bound: the lab's pruner, every few seconds while
        it is up (cellab.ran.logbound)."""
        max_bytes = lab_log_max_bytes()
        for ue in self._ues:
            ue.bound_logs(max_bytes)
        if self._broker is not None:  # its stats lines: read by their time since the broker's start
            logbound.free_middle(self._broker.log, max_bytes)

    def extra_agents(self) -> list[AgentSpec]:
        args = ("--srsran-bin", str(self.bin_dir))
        return [AgentSpec("enb", "enb", kind="srsran", netns=self.core_ns, args=args),
                AgentSpec("core", "core", kind="epc", netns=self.core_ns, args=args)]

    def bind(self, controller: Any, agents: dict[str, str]) -> None:
        super().bind(controller, agents)
        self._start_core(default_core())

    def _start_core(self, flavour: str) -> None:
        """The core agent renders the core's profile, provisions every UE's subscriber row (srsEPC: user_db.csv;
        Open5GS: its FerretDB, in Open5GS's schema) and starts the daemons."""
        core = self._core()
        core.stop()  # whatever ran before (configure refuses while daemons run)
        self.core_flavour, self.core_version = None, ""
        try:
            core.configure(CoreConfigureParams(
                profile_yaml=CORE_PROFILES[flavour].read_text(), flavour=flavour,
                subscribers_csv=self.subscribers_text or subscribers_csv(self.n_ues)))
            status = core.start()
        except CellabError as exc:
            raise CellabError(f"srsran-zmq lab: {flavour} did not start: {exc}") from None
        if not status.ok:
            raise CellabError(f"srsran-zmq lab: {flavour} did not start: " + "; ".join(status.problems))
        self.core_flavour, self.core_version = flavour, status.version

    def _enb(self) -> EnbClient:
        return EnbClient(self.controller, self._agent("enb"), REQUEST_TIMEOUT_S)

    def _core(self) -> CoreClient:
        return CoreClient(self.controller, self._agent("core"), REQUEST_TIMEOUT_S)

    def _agent(self, role: str) -> str:
        names = [n for n, r in self.lab_agents.items() if r == role]
        if self.controller is None or not names:
            raise CellabError(f"srsran-zmq lab: no {role} agent bound (the session starts it after up())")
        return names[0]

    # ---- per run ------------------------------------------------------------------------------
    def configure(self, params: dict[str, Any]) -> None:
        """srsenb through its agent and the srsue (and with several UEs the broker), restarted together when a
        radio parameter changed or one is not running (a new srsue does not sync to an srsenb whose ZMQ peer
        went away); then attach, the eNB's RNTIs, each UE's default route and a ping through the EPC."""
        p = validate_params(params)
        self.join_s1_recovery()  # the last run's MME recovery restarts srsenb itself: never under this configure
        started = time.monotonic()
        enb = self._enb()
        status = enb.status()
        reasons = self._restart_reasons(p, status.state)
        per_ue = ue_attenuations(p.attenuation_db, params.get("ues"), self.n_ues, MAX_ATTENUATION_DB)
        common = min(per_ue)
        core = p.core or default_core()
        if core != self.core_flavour:
            reasons.append(f"core {self.core_flavour} -> {core}")
        elif self._applied is not None and (down := self._core_down() or self.s1_lost_reason()):
            reasons.append(down)  # the core afresh, and the UEs attached to it again
        if not reasons and (lost := self.lost_ues_fault()):  # srsenb restarted in the last run, a UE not back
            reasons.append(lost)
        self.enb_restart_settled()  # every UE back, or the stack restarts below
        if not reasons and (lost := self._lost_ues()):
            # a radio link failure since the last configure (the attenuator's safe state after a stopped schedule,
            # a fault): srsue re-establishes by itself once it hears the cell again; restart only if it does not
            self._apply_attenuation(enb, per_ue)
            reasons += [f"srsue {i} lost the cell and did not come back within {RECONNECT_WAIT_S:g} s"
                        for i in self._wait_reconnected(lost)]
        steps_s: dict[str, float] = {}  # where a restart's time goes
        if reasons:
            if status.state in ("running", "starting"):
                enb.safe_state()  # first: with srsue still on its ZMQ link srsenb stops at once
            steps_s["enb_stop"] = time.monotonic() - started
            self._stop_radio()
            steps_s["radio_stop"] = time.monotonic() - started - sum(steps_s.values())
            if core != self.core_flavour:
                self._start_core(core)
                steps_s["core_restart"] = time.monotonic() - started - sum(steps_s.values())
            elif self._applied is not None or self._ues_started:
                self._restart_core()
                steps_s["core_restart"] = time.monotonic() - started - sum(steps_s.values())
            self.s1_restored()
        self._enb_params = ConfigureParams(
            profile_yaml=self._enb_profile_yaml(p.n_prb), profile_name=ENB_PROFILE.name,
            overrides=RadioOverrides(n_prb=p.n_prb, sr_period_ms=p.sr_period_ms, cqi_period_ms=p.cqi_period_ms),
            ready_timeout_s=ENB_READY_TIMEOUT_S)
        result = enb.configure(self._enb_params)
        if result.restarted and not reasons:  # it died between status and configure
            reasons = result.restart_reasons
            self._stop_radio()
        self._apply_attenuation(enb, per_ue, renew_cell_gain=bool(reasons) or self._applied is None)
        if reasons:
            self._applied = None  # until the UEs are attached again
            self._start_ues(p.n_prb)
        self._enb_restarts = enb.status().restarts
        self._applied = p
        self._console_offsets = [ue.console.stat().st_size if ue.console.exists() else 0 for ue in self._ues]
        self._configured_at_s = time.time()
        rates = self._broker.rates() if self._broker is not None else []
        self._broker_t_at = float(rates[-1].get("t_s", -1.0)) if rates else -1.0  # a new broker counts from 0
        self._clock_start()  # the run's stack clock, from here to collect (zmqlab_run)
        self.last_configure = {"restarted": bool(reasons), "restart_reasons": reasons,
                               "enb_restart_reasons": result.restart_reasons, "configure_s": time.monotonic() - started,
                               "attach_s": self.last_attach_s if reasons else None,
                               "ue_attenuation_db": per_ue, "cell_gain_db": -common,
                               "broker_dl_gain_db": self._broker_gains_db(),
                               "broker_ul_gain_db": self._broker_ul_gains_db(),
                               "steps_s": {k: round(v, 2) for k, v in steps_s.items()}}

    def _apply_attenuation(self, enb: EnbClient, per_ue: list[float], renew_cell_gain: bool = False) -> None:
        """The least of the UEs' attenuations as the eNB's cell_gain (sent when it changed, or when srsenb may have
        lost it), each UE's beyond it as its broker gain (now if the broker runs, else at its start)."""
        common = min(per_ue)
        if renew_cell_gain or common != self._cell_att_db:
            enb.cell_gain(CELL_ID, -common)
            self._cell_att_db = common
        for i, db in enumerate(per_ue):
            self.set_ue_attenuation(i, db)

    def renew_cell_gain(self) -> None:
        """The eNB's cell_gain sent again (a restarted srsenb starts at its profile's)."""
        self._enb().cell_gain(CELL_ID, -(self._cell_att_db or 0.0))

    def _restart_core(self) -> None:
        """The core afresh with the eNB: srsEPC keeps the old UEs' contexts of a stopped eNB, and their first
        attach to the new one is released (RRC Connection Release, ~5 s lost per restart, measured before the SCTP
        shims reported a lost peer; not measured since)."""
        core = self._core()
        core.stop()
        status = core.start()
        if not status.ok:
            raise CellabError(f"srsran-zmq lab: {self.core_flavour} did not restart: " + "; ".join(status.problems))
        self.core_version = status.version or self.core_version

    def _enb_profile_yaml(self, n_prb: int) -> str:
        """The eNB profile with its ZMQ stream at the cell's own rate (see the module doc) and its uplink noise floor
        (the UEs' uplink attenuation acts against it: zmqlab_attenuation)."""
        profile = yaml.safe_load(ENB_PROFILE.read_text())
        profile["rf"]["device"]["base_srate_hz"] = SAMPLE_RATE_HZ[n_prb]
        profile["channel"] = {"ul_awgn": enb_ul_awgn()}
        return yaml.safe_dump(profile, sort_keys=False)

    def _restart_reasons(self, p: ZmqLabParams, enb_state: str) -> list[str]:
        if self._applied is None:
            return ["first start" if not self._ues else "the last configure did not finish"]
        reasons = [f"{name} {getattr(self._applied, name)} -> {getattr(p, name)}" for name in RESTART_FIELDS
                   if getattr(self._applied, name) != getattr(p, name)]
        if enb_state != "running":
            reasons.append(f"srsenb {enb_state}")
        if self._broker is None or not self._broker.running():
            reasons.append("ZMQ broker not running")
        reasons += [f"srsue {ue.index} not running" for ue in self._ues if not ue.running()]
        return reasons

    def core_record(self) -> dict[str, str]:
        return {"flavour": self.core_flavour or "", "version": self.core_version}

    def fault(self) -> str | None:
        """What went wrong with the stack since configure (srsenb crashed or restarted, srsue exited, UEs that did
        not come back after srsEPC's restart), if anything: the runner names it when a run fails."""
        return self._crash() or self.lost_ues_fault()

    def _crash(self) -> str | None:
        """A part of the stack that crashed or restarted since configure. The broker first: srsenb and srsue
        stall without it."""
        if self._broker is not None and not self._broker.running():
            return f"ZMQ broker exited during the run: {self._broker.last_line()}"
        st = self._enb().status()
        if st.state != "running":
            return (f"srsenb {st.state} during the run (exit code {st.exit_code}"
                    + (f": {st.error_line}" if st.error_line else "") + ")")
        if st.restarts != self._enb_restarts:
            return f"srsenb restarted during the run ({self._enb_restarts} -> {st.restarts} starts)"
        for ue in self._ues:
            if not ue.running():
                return f"srsue {ue.index} exited during the run: {ue.error_line() or 'see its srsue_console.log'}"
        down = self._core_down()
        return f"the core's {down} during the run" if down else None

    def _core_down(self) -> str | None:
        """A core daemon that is not running (its name, exit code and last error line), or None."""
        if not self.core_flavour or self.controller is None:
            return None
        dead = [d for d in self._core().status().daemons if not d.running]
        return "; ".join(f"{self.core_flavour} {d.name} exited ("
                         + (f"killed by signal {-d.exit_code}" if d.exit_code is not None and d.exit_code < 0
                            else f"exit code {d.exit_code}")
                         + (f"; its last line: {d.error}" if d.error else "") + ")" for d in dead) or None

    def down(self) -> None:
        self.stop_s1_recovery()  # before its UEs and srsenb go
        if self._attenuation is not None:
            self._attenuation.stop()
            self._attenuation = None
        self._stop_radio()
        if self._log_pruner is not None:
            self._log_pruner.stop()
            self._log_pruner = None
        self._applied = None
        self._remove()
        self.release_instance()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _remove(self) -> None:
        for name in (*map(self.ue_ns_of, range(self.n_ues)), self.srv_ns, self.core_ns):  # their processes first
            netns.remove(name)

    def _take_lock(self) -> None:
        if self._lock is not None:
            return
        timeout_s = env_seconds(LOCK_TIMEOUT_ENV, 600.0)
        try:
            self._lock = acquire(SRSRAN_LOCK, timeout_s, "srsran-zmq lab", tell=True)
        except HostLockTimeout as exc:
            raise CellabError(f"{exc} ({LOCK_TIMEOUT_ENV} sets the wait)") from None
        self.lock_wait_s = self._lock.waited_s
