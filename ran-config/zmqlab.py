"""The `srsran-zmq` lab: the real srsRAN 4G stack over ZMQ on this machine, driven through the same agents a
hardware lab uses (`enb` = cellab.ran.agent, `core` = the core room's srsEPC agent), srsue supervised here.

    <p>-srv  eth0 10.201.0.2 --veth-- srv0 10.201.0.1  <p>-core: srsepc (SGi srs_spgw_sgi 172.16.0.1),
                                                           srsenb, the ZMQ broker, the srsue (ZMQ on its lo)
    <p>-ue0  tun_srsue 172.16.0.2 (srsue puts its TUN here: [gw] netns)
    <p>-ueI  tun_srsue 172.16.0.(2+I), with several UEs (`ues`, up to MAX_UES)

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

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

import yaml

from cellab.hostlock import SRSRAN_LOCK, HostLock, HostLockTimeout, acquire
from cellab.contracts.core import ConfigureParams as CoreConfigureParams
from cellab.contracts.core import CoreClient
from cellab.contracts.enb import ConfigureParams, EnbClient, RadioOverrides
from cellab.envvars import env_seconds
from cellab.errors import CellabError, InputError
from cellab.labs import instances, netns
from cellab.labs.base import AgentSpec, EmbeddedLab, Host, Topology
from cellab.labs.proc import stop_all

from .report import effective_per_ue
from .srsue_proc import (RNTI_RE, REF_SNR_DB, TUN_NAME, SrsueError, SrsueProcess, UeSettings, find_srsue, ue_usim,
                         write_ue_telemetry)
from .uhd_args import SAMPLE_RATE_HZ
from .zmq_broker import STATS_PERIOD_S, BrokerProcess, ue_ports
from .zmqlab_attenuation import (ATTENUATOR_MAX_DB, RECONNECT_WAIT_S, AttenuationControl, UeRadio, enb_ul_awgn,
                                 ue_attenuations)
from .zmqlab_faults import FAULT_DAEMONS, StackFaults
from .zmqlab_provenance import ZmqLabProvenance
from .zmqlab_params import (CORE_ENV, CORE_PROFILE, CORE_PROFILES, ENB_PROFILE, MAX_ATTENUATION_DB, RESTART_FIELDS,
                            ZmqLabParams, default_core, srsran_bin_dir, subscribers_csv, ue_addr, validate_params)

# the lab's parameters live in zmqlab_params; these names stay importable from here
__all__ = ["CORE_ENV", "SrsranZmqLab", "ZmqLabParams", "default_core", "srsran_bin_dir", "subscribers_csv",
           "validate_params"]

LOCK_TIMEOUT_ENV = "CELLAB_SRSRAN_LOCK_TIMEOUT_S"
STATE_ROOT = Path("/run/cellab")
SERVER_ADDR, CORE_SIDE_ADDR, LINK_PREFIX = "10.201.0.2", "10.201.0.1", 24
CELL_ID = 1  # the example profile's cell
ATTACH_TIMEOUT_S = 60.0
ENB_READY_TIMEOUT_S = 30.0
REQUEST_TIMEOUT_S = 20.0
MAX_UES = 4
UE_STOP_GRACE_S = 0.5
CORE_CHECK_S = 2.0  # while UEs attach: how often the core is asked whether it refused one


class SrsranZmqLab(ZmqLabProvenance, StackFaults, UeRadio, EmbeddedLab):
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
        self._lab_events: list[dict[str, Any]] = []  # attenuation the broker applied, SGi cuts: with their wall time
        self._enb_restarts = 0
        self._enb_params: ConfigureParams | None = None  # the run's srsenb configuration (an enb_restart's restart)
        self._console_offsets: list[int] = []
        self._log_offsets: list[int] = []
        self._configured_at_s = 0.0
        self._broker_lines_at = 0  # the broker's stats lines before the run (timing_faults reads those after)
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
        self._log_offsets = [ue.log.stat().st_size if ue.log.exists() else 0 for ue in self._ues]
        self._configured_at_s = time.time()
        self._broker_lines_at = len(self._broker.rates()) if self._broker is not None else 0
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

    def timing_faults(self) -> dict[str, Any]:
        """How fast the stack ran since configure: srsenb's downlink samples through the broker against the cell's
        sample rate (1.0 = real time; over ZMQ srsRAN is clocked by its samples, so a busy host slows everything
        down instead of dropping TTIs). {} before a configure or the broker's first stats line after it."""
        msps = self._stream_msps()
        if not msps or self._applied is None:
            return {}
        nominal = SAMPLE_RATE_HZ[self._applied.n_prb] / 1e6
        mean = sum(msps) / len(msps)
        return {"stack_speed": round(mean / nominal, 3), "stack_msps": round(mean, 3), "nominal_msps": nominal,
                "stack_speed_min": round(min(msps) / nominal, 3), "stack_samples": len(msps)}

    def stack_tti_ms(self) -> float | None:
        """One TTI of the stack on the wall clock now: the cell's sample rate over what the broker moved in its
        first stats line after configure (the idle stream, as the SR probes see it before the download; waits
        for it, up to 1.5 stats periods). The UE's SR estimator's ruler, before its download's: at 6 PRB a slow
        download gave none, or bursts 4.3 ms apart for a stack at 0.7 of real time, and SR 10 was read as a
        confident 20 or 5, measured; the attach's own lines run slower (0.4-0.5) than the idle stream after it.
        None when the broker gives no line, or within 5 % of real time."""
        if self._broker is None or self._applied is None:
            return None
        deadline = time.monotonic() + 1.5 * STATS_PERIOD_S
        while not (msps := [m for m in self._stream_msps() if m > 0]) and time.monotonic() <= deadline:
            time.sleep(0.1)
        if not msps:
            return None
        speed = msps[0] / (SAMPLE_RATE_HZ[self._applied.n_prb] / 1e6)
        return None if abs(speed - 1) < 0.05 else round(min(20.0, max(0.5, 1.0 / speed)), 4)

    def _stream_msps(self) -> list[float]:
        """The downlink Msps of the broker's stats lines since configure (none before a configure), but those of
        periods the UEs heard silence (srsenb gone: an enb_restart), which measure the fault, not the stack."""
        if self._broker is None or self._applied is None:
            return []
        return [r["dl_msps"] for r in self._broker.rates()[self._broker_lines_at:]
                if isinstance(r.get("dl_msps"), (int, float)) and not r.get("silent_blocks")]

    def _restart_core(self) -> None:
        """The core afresh with the eNB: srsEPC keeps the old UEs' contexts of a stopped eNB, and their first
        attach to the new one is released (RRC Connection Release, ~5 s lost per restart, measured); Open5GS's
        MME is not told that the shim's S1 peer went away."""
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

    def _stop_radio(self) -> None:
        # srsenb is stopped by now, so srsue sits blocked in ZMQ and ignores SIGTERM (STOP_GRACE_S would pass in
        # full, 3.3 s measured): SIGKILL soon, all at once (its attach state is not kept anyway)
        stop_all(self._ues, grace_s=UE_STOP_GRACE_S)
        self._ues = []
        if self._broker is not None:
            self._broker.stop()
            self._broker = None

    def _start_ues(self, n_prb: int) -> None:
        """All UEs at once (the broker's downlink advances only when every UE asks), each attached with its
        own IP, as many RNTIs at the eNB, each UE's route through tun_srsue and a ping to the server."""
        self._stop_radio()
        self._ues_started = True
        t0 = time.monotonic()
        settings = UeSettings(n_prb=n_prb, base_srate_hz=SAMPLE_RATE_HZ[n_prb])
        self._broker = BrokerProcess(self.state_dir / "broker", self.n_ues, netns=self.core_ns,
                                     dl_gains_db=self._broker_gains_db(), srate_hz=SAMPLE_RATE_HZ[n_prb],
                                     ul_gains_db=self._broker_ul_gains_db())
        self._broker.start()
        binary = find_srsue(self.bin_dir)
        for i in range(self.n_ues):
            ue = SrsueProcess(binary, self.state_dir / f"ue{i}", settings, netns=self.core_ns,
                              ue_netns=self.ue_ns_of(i), index=i,
                              ports=ue_ports(i))
            ue.console.unlink(missing_ok=True)
            ue.start()
            self._ues.append(ue)
        self._wait_attached(t0)
        self._wait_enb_rnti(t0)
        for i in range(self.n_ues):
            subprocess.run(netns.in_netns(self.ue_ns_of(i), ["ip", "route", "replace", "default", "dev", TUN_NAME]),
                           check=True, capture_output=True)
            self._check_path(i)
        self.last_attach_s = time.monotonic() - t0

    def _wait_attached(self, t0: float) -> None:
        """Every UE attached with its own IP; a UE the core refused (its own line naming the UE's IMSI: unknown, or
        its authentication failed)
        fails at once, naming the IMSI and the core's line, instead of after ATTACH_TIMEOUT_S."""
        pending = list(self._ues)
        next_core_check = time.monotonic() + CORE_CHECK_S
        while pending:
            for ue in list(pending):
                imsi = ue_usim(ue.index)["imsi"]
                try:
                    ip = ue.wait_attached(0.2)
                except SrsueError as exc:
                    if ue.running() and time.monotonic() - t0 < ATTACH_TIMEOUT_S:
                        continue
                    why = str(exc) if not ue.running() else (  # the slice's own timeout is not the lab's
                        f"srsue did not attach within {ATTACH_TIMEOUT_S:g} s: {str(exc).split(': ', 1)[-1]}")
                    raise CellabError(f"srsran-zmq lab: UE {ue.index} (IMSI {imsi}): {why}"
                                      f"{self._enb_problem()}{self._core_problem()}") from None
                if ip != ue_addr(ue.index):
                    raise CellabError(f"srsran-zmq lab: srsue {ue.index} attached with IP {ip}, the topology says "
                                      f"{ue_addr(ue.index)}")
                pending.remove(ue)
            if pending and time.monotonic() >= next_core_check:
                next_core_check = time.monotonic() + CORE_CHECK_S
                for ue in pending:
                    refused = self._core_refusal(ue_usim(ue.index)["imsi"])
                    if refused:
                        raise CellabError(f"srsran-zmq lab: UE {ue.index} (IMSI {ue_usim(ue.index)['imsi']}) was "
                                          f"refused by {self.core_flavour}: {refused}")

    def _core_refusal(self, imsi: str) -> str:
        """The core's own lines refusing this IMSI (unknown to its HSS, or its authentication failed), if any."""
        try:
            st = self._core().status()
        except CellabError:
            return ""
        return " | ".join(f"{f.daemon}: {f.line}" for f in st.findings
                          if f.kind in ("imsi_unknown", "auth_failure") and imsi in f.line)

    def _wait_enb_rnti(self, t0: float) -> None:
        enb = self._enb()
        while time.monotonic() - t0 < ATTACH_TIMEOUT_S:
            status = enb.status()
            if len(status.connected_rntis) >= self.n_ues:
                return
            if status.state != "running":
                break
            time.sleep(0.3)
        raise CellabError(f"srsran-zmq lab: {self.n_ues} srsue attached but the eNB reports "
                          f"{len(status.connected_rntis)} connected RNTIs" + self._enb_problem())

    def _check_path(self, index: int) -> None:
        """The data path UE → EPC SGi → server namespace answers (a ping within 5 tries of 2 s)."""
        argv = netns.in_netns(self.ue_ns_of(index), ["ping", "-c", "1", "-W", "2", SERVER_ADDR])
        for _ in range(5):
            if subprocess.run(argv, capture_output=True, check=False).returncode == 0:
                return
        raise CellabError(f"srsran-zmq lab: UE {index} ({ue_addr(index)}) attached but does not reach the server "
                          f"{SERVER_ADDR} behind the EPC's SGi")

    def _enb_problem(self) -> str:
        try:
            st = self._enb().status()
        except CellabError:
            return ""
        if st.state == "running":
            return ""
        return f" (srsenb {st.state}: {st.error_line or f'exit code {st.exit_code}'})"

    def _core_problem(self) -> str:
        """The core's own reason a UE did not attach (its daemons' lines: unknown IMSI, S1 setup failure, ...)."""
        try:
            st = self._core().status()
        except CellabError:
            return ""
        return f"; {self.core_flavour} says: " + " | ".join(st.problems[:4]) if st.problems else ""

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

    def ground_truth(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The SR configuration srsENB signalled (the last RRCConnectionSetup's sr-ConfigIndex: with several UEs
        the same period, each UE its own offset); a crash or restart since configure fails the run, naming it."""
        crash = self._crash()  # a fault's own aftermath is the recovery's to judge (fault_state)
        if crash is not None:
            raise CellabError(crash)
        st = self._enb().status()
        if st.ground_truth is None:
            return None
        truth = st.ground_truth.model_dump(exclude={"rnti"})
        local = self.state_dir / "sr_occasions.jsonl"  # the eNB's own SR receptions (its PHY log), per UE
        try:
            self.controller.fetch_artifact(self._agent("enb"), local.name, local)
            self._effective = effective_per_ue(local, self._configured_at_s, truth["sr_period_ms"], {
                f"ue{ue.index}": RNTI_RE.findall(ue.console_text())[-1:] for ue in self._ues})
        except Exception:  # noqa: BLE001 (none logged yet)
            self._effective = {}
        truth["core"] = self.core_record()  # the record names the EPC each run went through
        if self._effective:  # beside the configured period
            truth["effective"] = {n: {k: v for k, v in e.items() if k != "sr_ttis"} for n, e in self._effective.items()}
            truth["sr_effective_ms"] = self._effective.get("ue0", {}).get("period_ms")
        return truth

    def collect(self, run_dir: Path) -> dict[str, Path]:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        out: dict[str, Path] = {}
        for ue, offset in zip(self._ues, self._console_offsets, strict=False):
            out |= self._collect_ue(ue, offset, run_dir)
            write_ue_telemetry(ue, f"ue{ue.index}", self._configured_at_s, run_dir / "telemetry")
        if self._broker is not None and self._broker.log.exists():
            out["zmq-broker"] = Path(shutil.copyfile(self._broker.log, run_dir / "zmq_broker.log"))
        statuses = {"enb": self._enb().status().model_dump(mode="json"),
                    "core": self._core().status().model_dump(mode="json") | {"core": self.core_record()},
                    "configure": self.last_configure,
                    "lab": {"lock_wait_s": self.lock_wait_s},
                    "broker": {"running": bool(self._broker and self._broker.running()),
                               "rates": self._broker.rates()[-5:] if self._broker else []}}
        (run_dir / "lab_status.json").write_text(json.dumps(statuses, indent=1))
        events = [e for e in self._lab_events if e["t_s"] >= self._configured_at_s]
        if self._broker is not None:  # srsenb's connection lost and a new srsenb's first block, as the broker saw
            events += [{"event": f"broker_{e['event']}", "t_s": e["wall_s"], "dl_sample": e.get("dl_sample")}
                       for e in self._broker.events() if isinstance(e.get("wall_s"), (int, float))
                       and e["wall_s"] >= self._configured_at_s]
        for ue in self._ues:  # srsue's own RRC events: a radio-link failure and the way back (faults' recovery)
            events += self.rrc_events(ue)
        (run_dir / "lab_events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in sorted(
            events, key=lambda e: e["t_s"])))
        out["lab-events"] = run_dir / "lab_events.jsonl"
        if self._effective:  # the eNB's SR receptions per UE (read by ground_truth): the metrics' second truth
            (run_dir / "sr_effective.json").write_text(json.dumps(self._effective, indent=1))
            out["sr-effective"] = run_dir / "sr_effective.json"
        out["lab-status"] = run_dir / "lab_status.json"
        # the eNB agent's files (since the session began: the agent keeps them, the session removes them)
        for name in ("enb_metrics.jsonl", "sr_ground_truth.jsonl", "srsenb_console.log"):
            try:
                out[name.split(".")[0].replace("_", "-")] = self.controller.fetch_artifact(
                    self._agent("enb"), name, run_dir / name)
            except Exception:  # noqa: BLE001 (not written yet: no UE reported)
                continue
        return out

    def _collect_ue(self, ue: SrsueProcess, console_offset: int, run_dir: Path) -> dict[str, Path]:
        """srsue's console since configure, its log and per-second CSV (rsrp, dl_snr, mcs, rates); UE 0 under
        the names a one-UE lab always used, UE i with a `ueI_` prefix."""
        out: dict[str, Path] = {}
        prefix, key_suffix = ("", "") if ue.index == 0 else (f"ue{ue.index}_", f"-ue{ue.index}")
        if ue.console.exists():
            with open(ue.console, "rb") as src:
                src.seek(console_offset)
                (run_dir / f"{prefix}srsue_console.log").write_bytes(src.read())
            out["srsue-console" + key_suffix] = run_dir / f"{prefix}srsue_console.log"
        for key, src_path in (("srsue-log", ue.log), ("srsue-metrics", ue.metrics)):
            if src_path.exists():
                out[key + key_suffix] = Path(shutil.copyfile(src_path, run_dir / f"{prefix}{src_path.name}"))
        return out

    def down(self) -> None:
        if self._attenuation is not None:
            self._attenuation.stop()
            self._attenuation = None
        self._stop_radio()
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
