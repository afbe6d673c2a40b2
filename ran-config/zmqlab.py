"""The `srsran-zmq` lab: the real srsRAN 4G stack over ZMQ on this machine, driven through the same agents a
hardware lab uses (`enb` = cellab.ran.agent, `core` = the core room's srsEPC agent), srsue supervised here.

    <p>-srv  eth0 10.201.0.2 --veth-- srv0 10.201.0.1  <p>-core: srsepc (SGi srs_spgw_sgi 172.16.0.1),
                                                           srsenb, srsue (ZMQ 2000/2001 on the namespace's lo)
    <p>-ue0  tun_srsue 172.16.0.2 (srsue puts its TUN here: [gw] netns)

S1 (through the bundle's SCTP shim: abstract AF_UNIX sockets), GTP-U and ZMQ all stay inside <p>-core, so
nothing of the stack touches the root namespace. The lab holds the host lock /tmp/cellab-srsran.lock (cellab.hostlock) from `up` to `down`
(one srsRAN stack per machine).

Attenuation (anchors §1.6): over ZMQ the eNB's `cell_gain` moves RSRP but not SINR (there is no noise), so
srsue runs its DL AWGN channel emulator as a fixed noise floor (30 dB SNR at 0 dB, srsue_proc.REF_SNR_DB) and
a run's attenuation_db is `cell_gain -attenuation_db` against it: RSRP and SNR both drop dB for dB, and a new
attenuation needs no restart.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from cellab.hostlock import SRSRAN_LOCK, HostLock, HostLockTimeout, acquire
from cellab.contracts.core import ConfigureParams as CoreConfigureParams
from cellab.contracts.core import CoreClient
from cellab.contracts.enb import ConfigureParams, EnbClient, RadioOverrides
from cellab.errors import CellabError, from_validation_error
from cellab.labs import netns
from cellab.labs.base import AgentSpec, EmbeddedLab, Host, Topology
from cellab.paths import PROJECT_ROOT

from .srsenb_proc import BIN_ENV
from .srsue_proc import TEST_USIM, TUN_NAME, SrsueError, SrsueProcess, UeSettings, find_srsue

BUNDLE_BIN = PROJECT_ROOT.parent / "shared" / "tools" / "srsran" / "bin"
ENB_PROFILE = Path(__file__).resolve().parent / "examples" / "zmq-25prb.yaml"
CORE_PROFILE = PROJECT_ROOT / "core-config" / "examples" / "srsran-zmq.yaml"
LOCK_TIMEOUT_ENV = "CELLAB_SRSRAN_LOCK_TIMEOUT_S"
STATE_ROOT = Path("/run/cellab")
SERVER_ADDR, CORE_SIDE_ADDR, LINK_PREFIX = "10.201.0.2", "10.201.0.1", 24
UE_ADDR = "172.16.0.2"  # the subscriber's static IP (the core profile's ue_subnet 172.16.0.0/24)
CELL_ID = 1  # the example profile's cell
ATTACH_TIMEOUT_S = 60.0
ENB_READY_TIMEOUT_S = 30.0
MAX_ATTENUATION_DB = 25.0
REQUEST_TIMEOUT_S = 20.0


class ZmqLabParams(BaseModel):
    """The run parameters the srsran-zmq lab acts on (what srsENB over ZMQ supports here)."""

    model_config = ConfigDict(extra="forbid")

    n_prb: Literal[6, 15, 25, 50] = 25
    sr_period_ms: Literal[5, 10, 20, 40, 80] = 20
    cqi_period_ms: Literal[2, 5, 10, 20, 40, 80, 160, 32, 64, 128] = 40
    attenuation_db: float = Field(0.0, ge=0, le=MAX_ATTENUATION_DB, allow_inf_nan=False,
                                  description="eNB cell_gain -attenuation_db against srsue's fixed DL "
                                              "noise floor: SNR 30 - attenuation_db dB")


RESTART_FIELDS = ("n_prb", "sr_period_ms", "cqi_period_ms")  # srsenb reads them only at start


def srsran_bin_dir() -> Path:
    """The folder with srsenb, srsue and srsepc: $CELLAB_SRSRAN_BIN, else ../shared/tools/srsran/bin, else PATH."""
    searched = []
    for folder in filter(None, [os.environ.get(BIN_ENV), str(BUNDLE_BIN)]):
        searched.append(folder)
        if all((Path(folder) / p).is_file() for p in ("srsenb", "srsue", "srsepc")):
            return Path(folder).resolve()
    on_path = shutil.which("srsenb")
    searched.append("PATH")
    if on_path and all(shutil.which(p) for p in ("srsue", "srsepc")):
        return Path(on_path).resolve().parent
    raise CellabError("srsran-zmq lab: srsenb, srsue and srsepc not found together; searched: "
                      + "; ".join(searched) + f" (set {BIN_ENV} to an srsRAN 4G bin folder)")


def subscribers_csv() -> str:
    """The one subscriber srsue's USIM matches, in the core room's subscriber CSV format."""
    u = TEST_USIM
    return ("name,imsi,k,opc,amf,apn,static_ip,sqn,qci\n"
            f"ue1,{u['imsi']},{u['k']},{u['opc']},8000,srsapn,{UE_ADDR},0,7\n")


class SrsranZmqLab(EmbeddedLab):
    kind = "srsran-zmq"
    params_model = ZmqLabParams
    max_ues = 1  # one srsue per ZMQ eNB (several need a broker: anchors §1.5)

    def __init__(self, prefix: str = "czq", bin_dir: str | Path | None = None):
        self.prefix = netns.check_prefix(prefix)
        self._bin_dir = Path(bin_dir) if bin_dir else None
        self.state_dir = STATE_ROOT / f"srsran-{self.prefix}"
        self.controller: Any = None
        self.lab_agents: dict[str, str] = {}
        self._lock: HostLock | None = None
        self._ue: SrsueProcess | None = None
        self._applied: ZmqLabParams | None = None
        self._enb_restarts = 0
        self._console_offset = 0
        self.last_attach_s: float | None = None  # configure → attached, of the last (re)attach
        self.last_configure: dict[str, Any] = {}
        self.lock_wait_s = 0.0  # how long up() waited for another srsRAN stack to finish

    # ---- names --------------------------------------------------------------------------------
    @property
    def core_ns(self) -> str:
        return f"{self.prefix}-core"

    @property
    def ue_ns(self) -> str:
        return f"{self.prefix}-ue0"

    @property
    def srv_ns(self) -> str:
        return f"{self.prefix}-srv"

    @property
    def bin_dir(self) -> Path:
        if self._bin_dir is None:
            self._bin_dir = srsran_bin_dir()
        return self._bin_dir

    def topology(self) -> Topology:
        return Topology(server=Host("server", self.srv_ns, SERVER_ADDR), ues=(Host("ue0", self.ue_ns, UE_ADDR),),
                        extra={"core_netns": self.core_ns, "srsran_bin": str(self.bin_dir)})

    # ---- lifecycle ----------------------------------------------------------------------------
    def up(self) -> Topology:
        netns.require_root("the srsran-zmq lab")
        self.bin_dir  # noqa: B018  (fail before touching anything)
        for path in (ENB_PROFILE, CORE_PROFILE):
            if not path.is_file():
                raise CellabError(f"srsran-zmq lab: {path} is missing")
        self._take_lock()
        try:
            self._remove()
            self.state_dir.mkdir(parents=True, exist_ok=True)
            os.chmod(self.state_dir, 0o700)
            for name in (self.core_ns, self.ue_ns, self.srv_ns):
                netns.create(name)
            netns.veth(self.core_ns, "srv0", self.srv_ns, "eth0")
            netns.address(self.core_ns, "srv0", f"{CORE_SIDE_ADDR}/{LINK_PREFIX}")
            netns.address(self.srv_ns, "eth0", f"{SERVER_ADDR}/{LINK_PREFIX}")
            netns.default_route(self.srv_ns, CORE_SIDE_ADDR)
            netns.sysctl(self.core_ns, "net.ipv4.ip_forward", "1")
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
        core = self._core()
        core.configure(CoreConfigureParams(profile_yaml=CORE_PROFILE.read_text(), flavour="srsepc",
                                           subscribers_csv=subscribers_csv()))
        status = core.start()
        if not status.ok:
            raise CellabError("srsran-zmq lab: srsEPC did not start: " + "; ".join(status.problems))

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
        """srsenb through its agent and srsue, restarted together when a radio parameter changed or either is
        not running (a new srsue does not sync to an srsenb whose ZMQ peer went away); then attach, the eNB's
        RNTI, the UE's default route and one ping through the EPC."""
        p = validate_params(params)
        started = time.monotonic()
        enb = self._enb()
        status = enb.status()
        reasons = self._restart_reasons(p, status.state)
        if reasons:
            if status.state in ("running", "starting"):
                enb.safe_state()  # first: with srsue still on its ZMQ link srsenb stops at once
            if self._ue is not None:
                self._ue.stop()
        result = enb.configure(ConfigureParams(
            profile_yaml=ENB_PROFILE.read_text(), profile_name=ENB_PROFILE.name,
            overrides=RadioOverrides(n_prb=p.n_prb, sr_period_ms=p.sr_period_ms, cqi_period_ms=p.cqi_period_ms),
            ready_timeout_s=ENB_READY_TIMEOUT_S))
        if result.restarted and not reasons:  # it died between status and configure
            reasons = result.restart_reasons
            if self._ue is not None:
                self._ue.stop()
        if reasons or self._applied is None or p.attenuation_db != self._applied.attenuation_db:
            enb.cell_gain(CELL_ID, -p.attenuation_db)
        if reasons:
            self._applied = None  # until the UE is attached again
            self._start_ue(UeSettings(n_prb=p.n_prb))
        self._enb_restarts = enb.status().restarts
        self._applied = p
        self._console_offset = self._ue.console.stat().st_size if self._ue and self._ue.console.exists() else 0
        self.last_configure = {"restarted": bool(reasons), "restart_reasons": reasons,
                               "enb_restart_reasons": result.restart_reasons, "configure_s": time.monotonic() - started,
                               "attach_s": self.last_attach_s if reasons else None}

    def _restart_reasons(self, p: ZmqLabParams, enb_state: str) -> list[str]:
        if self._applied is None:
            return ["first start" if self._ue is None else "the last configure did not finish"]
        reasons = [f"{name} {getattr(self._applied, name)} -> {getattr(p, name)}" for name in RESTART_FIELDS
                   if getattr(self._applied, name) != getattr(p, name)]
        if enb_state != "running":
            reasons.append(f"srsenb {enb_state}")
        if self._ue is None or not self._ue.running():
            reasons.append("srsue not running")
        return reasons

    def _start_ue(self, settings: UeSettings) -> None:
        if self._ue is not None:
            self._ue.stop()
        t0 = time.monotonic()
        self._ue = SrsueProcess(find_srsue(self.bin_dir), self.state_dir / "ue", settings, netns=self.core_ns,
                                ue_netns=self.ue_ns)
        self._ue.console.unlink(missing_ok=True)
        self._ue.start()
        try:
            ip = self._ue.wait_attached(ATTACH_TIMEOUT_S)
        except SrsueError as exc:
            raise CellabError(f"srsran-zmq lab: {exc}{self._enb_problem()}") from None
        if ip != UE_ADDR:
            raise CellabError(f"srsran-zmq lab: srsue attached with IP {ip}, the topology says {UE_ADDR}")
        self._wait_enb_rnti(t0)
        subprocess.run(netns.in_netns(self.ue_ns, ["ip", "route", "replace", "default", "dev", TUN_NAME]),
                       check=True, capture_output=True)
        self._check_path()
        self.last_attach_s = time.monotonic() - t0

    def _wait_enb_rnti(self, t0: float) -> None:
        enb = self._enb()
        while time.monotonic() - t0 < ATTACH_TIMEOUT_S:
            status = enb.status()
            if status.connected_rntis:
                return
            if status.state != "running":
                break
            time.sleep(0.3)
        raise CellabError("srsran-zmq lab: srsue attached but the eNB reports no connected RNTI"
                          + self._enb_problem())

    def _check_path(self) -> None:
        """The data path UE → EPC SGi → server namespace answers (3 pings within 10 s)."""
        argv = netns.in_netns(self.ue_ns, ["ping", "-c", "1", "-W", "2", SERVER_ADDR])
        for _ in range(5):
            if subprocess.run(argv, capture_output=True, check=False).returncode == 0:
                return
        raise CellabError(f"srsran-zmq lab: the UE ({UE_ADDR}) attached but does not reach the server "
                          f"{SERVER_ADDR} behind the EPC's SGi")

    def _enb_problem(self) -> str:
        try:
            st = self._enb().status()
        except CellabError:
            return ""
        if st.state == "running":
            return ""
        return f" (srsenb {st.state}: {st.error_line or f'exit code {st.exit_code}'})"

    def fault(self) -> str | None:
        """What went wrong with the stack since configure (srsenb crashed or restarted, srsue exited), if
        anything: the runner names it when a run fails."""
        st = self._enb().status()
        if st.state != "running":
            return (f"srsenb {st.state} during the run (exit code {st.exit_code}"
                    + (f": {st.error_line}" if st.error_line else "") + ")")
        if st.restarts != self._enb_restarts:
            return f"srsenb restarted during the run ({self._enb_restarts} -> {st.restarts} starts)"
        if self._ue is not None and not self._ue.running():
            return f"srsue exited during the run: {self._ue.error_line() or 'see srsue_console.log'}"
        return None

    def ground_truth(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The SR configuration srsENB signalled (RRCConnectionSetup sr-ConfigIndex); a crash or restart of
        srsenb since configure fails the run, naming it."""
        fault = self.fault()
        if fault is not None:
            raise CellabError(fault)
        st = self._enb().status()
        if st.ground_truth is None:
            return None
        return st.ground_truth.model_dump(exclude={"rnti"})

    def collect(self, run_dir: Path) -> dict[str, Path]:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        out: dict[str, Path] = {}
        if self._ue is not None and self._ue.console.exists():
            with open(self._ue.console, "rb") as src:
                src.seek(self._console_offset)
                (run_dir / "srsue_console.log").write_bytes(src.read())
            out["srsue-console"] = run_dir / "srsue_console.log"
            for key, src_path in (("srsue-log", self._ue.log), ("srsue-metrics", self._ue.metrics)):
                if src_path.exists():  # srsue's own log; its per-second CSV (rsrp, dl_snr, mcs, rates)
                    out[key] = Path(shutil.copyfile(src_path, run_dir / src_path.name))
        statuses = {"enb": self._enb().status().model_dump(mode="json"),
                    "core": self._core().status().model_dump(mode="json"), "configure": self.last_configure,
                    "lab": {"lock_wait_s": self.lock_wait_s}}
        (run_dir / "lab_status.json").write_text(json.dumps(statuses, indent=1))
        out["lab-status"] = run_dir / "lab_status.json"
        # the eNB agent's files (since the session began: the agent keeps them, the session removes them)
        for name in ("enb_metrics.jsonl", "sr_ground_truth.jsonl", "srsenb_console.log"):
            try:
                out[name.split(".")[0].replace("_", "-")] = self.controller.fetch_artifact(
                    self._agent("enb"), name, run_dir / name)
            except Exception:  # noqa: BLE001 (not written yet: no UE reported)
                continue
        return out

    def down(self) -> None:
        if self._ue is not None:
            self._ue.stop()
            self._ue = None
        self._applied = None
        self._remove()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def _remove(self) -> None:
        for name in (self.ue_ns, self.srv_ns, self.core_ns):  # processes left inside are killed first
            netns.remove(name)

    def _take_lock(self) -> None:
        if self._lock is not None:
            return
        timeout_s = float(os.environ.get(LOCK_TIMEOUT_ENV, "600"))
        try:
            self._lock = acquire(SRSRAN_LOCK, timeout_s, "srsran-zmq lab", tell=True)
        except HostLockTimeout as exc:
            raise CellabError(f"{exc} ({LOCK_TIMEOUT_ENV} sets the wait)") from None
        self.lock_wait_s = self._lock.waited_s


def validate_params(params: dict[str, Any], source: str = "run parameters") -> ZmqLabParams:
    own = {k: v for k, v in params.items() if k in ZmqLabParams.model_fields and v is not None}
    try:
        return ZmqLabParams(**own)
    except ValidationError as exc:
        raise from_validation_error(source, exc) from None
