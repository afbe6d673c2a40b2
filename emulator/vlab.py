"""The virtual lab: network namespaces joined by the emulated LTE cell (cellab-cell).

    <prefix>-srv  lte0 10.200.0.1  --(cellab-cell: core delay, RLC queue, radio)--  lte0 10.200.1.(i+1)  <prefix>-ue<i>

The cell opens the TUN devices itself (inside each namespace); this module makes the namespaces, then
addresses and routes once the cell is up, and removes everything in `down()`.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

from cellab.envvars import lab_log_max_bytes
from cellab.errors import CellabError, InputError
from cellab.labs import instances
from cellab.labs.base import EmbeddedLab, Host, Topology
from cellab.labs.cellctl import CellControl
from cellab.labs.clock import StackClock
from cellab.labs.netns import NetNS
from cellab.labs.netns import pr_netns as netns
from cellab.labs.proc import die_with_parent
from cellab.paths import find_program

from .hostpause import HostFreezer
from .logsegments import join_clock, join_text_log, join_tti_log, older
from .params import MAX_UES, CellParams, validate_params
from .vlab_provenance import VirtualLabProvenance

STATE_ROOT = Path("/run/cellab")
TUN_NAME = "lte0"
SERVER_ADDR = "10.200.0.1"
UE_NET = "10.200.1.0/24"
SERVER_NET = "10.200.0.0/24"
READY_TIMEOUT_S = 10.0
CLOCK_FILE = "stack-clock-dl.bin"  # the cell's own clock in a run's artifacts, named as the srsran-zmq lab's


def ue_addr(i: int) -> str:
    return f"10.200.1.{i + 1}"


class VirtualLab(VirtualLabProvenance, EmbeddedLab):
    """The `virtual` embedded lab: one server namespace, n UE namespaces, the emulated cell between."""

    kind = "virtual"
    #: the run-parameter model the campaign loader merges into RunParams (cellab.campaign.model.params_model_for)
    params_model = CellParams
    cell_attenuator = True
    #: radio_outage: the attenuator agent drives the UE's channel to its maximum (the cell's RLF model runs);
    #: s1_cut / sgi_cut: the cell's set_s1 / set_sgi op (packets between the eNB and the core, or between the
    #: core and the server, lost both ways); enb_restart: the cell's set_enb op (every UE's context and queues
    #: gone, the UEs fail their radio link and connect anew); ue_pause: the UE's host frozen (hostpause.py) and
    #: its packets dropped between its modem and its namespace (the cell's set_ue_host op)
    fault_kinds = frozenset({"radio_outage", "s1_cut", "sgi_cut", "enb_restart", "ue_pause"})
    #: its TTI log gives every run the cell's capacity_bps, hence utilization (a stopping rule may watch it)
    reports_cell_capacity = True
    parameters = frozenset(CellParams.model_fields)
    #: the cell inherits the instance's lease (`cellab vlab up`: the lab outlives the command)
    cell_keeps_lease = False

    #: UEs one virtual lab can run (one namespace each, one cell serving them all)
    max_ues = MAX_UES
    #: radio.h: RS EPRE -60 dBm at 0 dB against thermal noise per RE (-132.24 dBm) + 9 dB UE noise figure
    #: (the cell then caps SINR at 40 dB)
    snr_at_0db_attenuation_db = -60.0 - (-132.24 + 9.0)

    def __init__(self, prefix: str = "clv", params: dict[str, Any] | CellParams | None = None, *,
                 ues: int | None = None, **kwargs: Any):
        """`ues`: how many UEs (1..16; the cell parameter `n_ues`, which it overrides when they agree or
        `n_ues` is not given). Other keywords are cell parameters (CellParams)."""
        self.prefix = instances.check_prefix(prefix, "virtual lab")
        values = params.model_dump(exclude_none=True) if isinstance(params, CellParams) else dict(params or {})
        values = {**values, **kwargs}
        if ues is not None:
            if isinstance(ues, bool) or not isinstance(ues, int) or not 1 <= ues <= MAX_UES:
                raise InputError("virtual lab", "ues", f"{ues!r} is not a UE count", [f"1..{MAX_UES}"])
            if "n_ues" in values and values["n_ues"] != ues:
                raise InputError("virtual lab", "ues", f"{ues} disagrees with n_ues {values['n_ues']}",
                                 [values["n_ues"]])
            values["n_ues"] = ues
        self.params = validate_params(values)
        self.log_max_bytes = lab_log_max_bytes()  # the cell's TTI log, own clock and cell.log, each with its older segment
        self.state_dir = STATE_ROOT / self.prefix
        self.host_freezer = HostFreezer(self.prefix, self.state_dir)

    @property
    def ue_count(self) -> int:
        """UEs this lab runs: hosts ue0..ue{N-1} of the topology, UE i in namespace `<prefix>-ue<i>`."""
        return self.params.n_ues

    # ---- names -------------------------------------------------------------------------------------
    @property
    def srv_ns(self) -> str:
        return f"{self.prefix}-srv"

    def ue_ns(self, i: int) -> str:
        return f"{self.prefix}-ue{i}"

    @property
    def ctl_endpoint(self) -> str:
        return f"ipc://{self.state_dir}/cell.ctl"

    @property
    def pub_endpoint(self) -> str:
        return f"ipc://{self.state_dir}/cell.pub"

    @property
    def pid_file(self) -> Path:
        return self.state_dir / "cell.pid"

    @property
    def tti_log(self) -> Path:
        return self.state_dir / "tti.bin"

    @property
    def cell_log(self) -> Path:
        return self.state_dir / "cell.log"

    @property
    def cell_clock(self) -> Path:
        """The cell's own stack clock (`--clock-out`): the wall time each TTI ran, in the recorded clocks' format."""
        return self.state_dir / CLOCK_FILE

    def topology(self) -> Topology:
        return Topology(
            server=Host("server", self.srv_ns, SERVER_ADDR),
            ues=tuple(Host(f"ue{i}", self.ue_ns(i), ue_addr(i)) for i in range(self.params.n_ues)),
            extra={"ctl": self.ctl_endpoint, "pub": self.pub_endpoint, "tti_log": str(self.tti_log),
                   "ue_count": self.params.n_ues},
        )

    def control(self, timeout_ms: int = 2000) -> CellControl:
        return CellControl(self.ctl_endpoint, timeout_ms)

    # ---- per UE ------------------------------------------------------------------------------------
    def _check_ue(self, ue: int) -> int:
        if isinstance(ue, bool) or not isinstance(ue, int) or not 0 <= ue < self.params.n_ues:
            raise InputError("virtual lab", "ue", f"{ue!r} is not a UE of this lab", [f"0..{self.params.n_ues - 1}"])
        return ue

    def set_ue_attenuation(self, ue: int, attenuation_db: float) -> dict[str, Any]:
        """Attenuation in front of one UE (0..200 dB), applied by the cell at once (its RSRP/SINR follow; its
        CQI after the next report). The reply: `{"ok", "ue", "attenuation_db", "tti"}`."""
        with self.control() as ctl:
            return ctl.set_attenuation(self._check_ue(ue), float(attenuation_db))

    def ue_attenuation(self, ue: int) -> dict[str, Any]:
        """`{"ue", "attenuation_db", "rsrp_dbm", "tti", ...}` of one UE, from the cell."""
        with self.control() as ctl:
            return ctl.get_attenuation(self._check_ue(ue))

    def ue_stats(self) -> list[dict[str, Any]]:
        """The cell's counters per UE, in UE order (README "Control and telemetry": rsrp_dbm, sinr_db, cqi,
        queue_bytes, delivered_bytes, dl_drop_pkts, harq_retx, sr_sent, ...)."""
        with self.control() as ctl:
            return list(ctl.stats()["ues"])

    # ---- lifecycle ---------------------------------------------------------------------------------
    def up(self) -> Topology:
        program = find_program("cellab-cell")  # fail before touching anything
        self.claim_instance()
        self._remove()  # a crashed instance of this prefix: its leftovers
        self.state_dir.mkdir(parents=True, exist_ok=True)
        os.chmod(self.state_dir, 0o700)
        try:
            for name in [self.srv_ns] + [self.ue_ns(i) for i in range(self.params.n_ues)]:
                netns.create(name)
                with NetNS(name) as ns:
                    ns.link("set", index=ns.link_lookup(ifname="lo")[0], state="up")
                # IPv4 only: router/neighbour solicitations would otherwise wake the uplink scheduler.
                # No TCP metrics cache: a closed connection's ssthresh and RTT would seed the next run's flows to
                # the same address, so a run's start depended on the runs before it in the session
                for key in [f"net.ipv6.conf.{k}.disable_ipv6=1" for k in ("all", "default")] + [
                        "net.ipv4.tcp_no_metrics_save=1"]:
                    subprocess.run(["ip", "netns", "exec", name, "sysctl", "-q", "-w", key], check=True,
                                   capture_output=True)
            self._start_cell(program)
        except BaseException:
            self.down()
            raise
        return self.topology()

    def configure(self, params: dict[str, Any]) -> None:
        """Restart the cell with this run's parameters (a fresh TTI log per run); the namespaces stay.
        Run parameters of other concerns (cc, receiver, ...) are not the cell's and are ignored here."""
        # the UE count is fixed when the lab comes up (the session brings up as many as the campaign's largest
        # run asks for with `ues`); a run's planned parameters carry the cell model's default n_ues
        own = {k: v for k, v in params.items() if k in CellParams.model_fields and k != "n_ues"}
        if own.get("rlf") is None:  # the RLF model runs in faulted runs (existing runs stay bit-identical)
            faulted = params.get("faults", "none") not in (None, "none")
            own["rlf"] = True if faulted and not (own.get("trace") or own.get("trace_up") or own.get("unlimited")) \
                else None
        merged = {**self.params.model_dump(exclude_none=True), **own}
        new = validate_params(merged, "run parameters")
        if new.n_ues != self.params.n_ues:
            raise InputError("run parameters", "n_ues", "cannot change while the virtual lab is up",
                             [self.params.n_ues])
        self._stop_cell()
        self.params = new
        self._start_cell(find_program("cellab-cell"))

    def ground_truth(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The SR configuration the cell gave its first UE (its config: no RRC here), as the cell reports it."""
        ue = self.ue_stats()[0]
        return {"sr_period_ms": int(ue["sr_period_ms"]), "sr_offset_ms": int(ue["sr_offset"]),
                "sr_config_index": int(ue["i_sr"]), "source": "config"}

    def inject_fault(self, step: Any) -> dict[str, Any]:
        """The faults the lab injects itself (`step`: a cellab.faults.spec.FaultStep); the reply has the cell's TTI.
        s1_cut / sgi_cut / enb_restart: the cell's `set_s1` / `set_sgi` / `set_enb` op (up false at the start,
        true at the end). ue_pause: at the start the cell stops passing UE `ue`'s packets to and from its
        namespace (its modem stays connected), then the host's processes are frozen; at the end they are
        thawed, then its packets pass again."""
        ops = {"s1_cut": "set_s1", "sgi_cut": "set_sgi", "enb_restart": "set_enb"}
        kind = getattr(step, "kind", None)
        if kind == "ue_pause":
            return self._pause_ue_host(self._check_ue(step.ue), bool(step.active))
        if kind not in ops:
            raise CellabError(f"the virtual lab injects {getattr(step, 'kind', step)} faults through their owner "
                              "(radio_outage: the attenuator agent); its own: s1_cut, sgi_cut, enb_restart, ue_pause")
        with self.control(2000) as ctl:
            return ctl.request(ops[kind], up=not step.active)

    def ue_agent_marks(self, ue: int) -> list[tuple[str, str]]:
        """How UE `ue`'s agent is told from every other process: the argv flag and value naming this instance's
        UE (the virtual UE agent's namespace; a virtual phone's serial on virtual-android)."""
        marks = [("--netns", self.ue_ns(ue))]
        serial = getattr(self, "serial", None)
        return marks + [("--serial", serial(ue))] if callable(serial) else marks

    def _pause_ue_host(self, ue: int, pause: bool) -> dict[str, Any]:
        if pause:
            with self.control(2000) as ctl:
                reply = ctl.request("set_ue_host", ue=ue, up=False)
            return reply | self.host_freezer.freeze(ue, self.ue_ns(ue), self.ue_agent_marks(ue))
        thawed = self.host_freezer.thaw(ue)
        with self.control(2000) as ctl:
            return ctl.request("set_ue_host", ue=ue, up=True) | thawed

    def fault_state(self) -> dict[str, Any]:
        """Each UE's RRC state (with the RLF model on), the S1 and SGi paths and the eNB, from the cell; the UEs
        whose host is still paused (`ue_paused`: frozen, or the cell still holding its packets)."""
        with self.control(1000) as ctl:
            stats = ctl.stats()
        paused = set(self.host_freezer.paused()) | {u["ue"] for u in stats["ues"] if u.get("host_up") is False}
        return {"rrc_state": {str(u["ue"]): u["rrc_state"] for u in stats["ues"] if "rrc_state" in u},
                **{k: stats[k] for k in ("s1_up", "sgi_up", "enb_up") if k in stats},
                "ue_paused": sorted(paused)}

    def clock_mark(self) -> dict[str, float]:
        """The cell's TTI now, with the wall clock at the middle of the request (≤ 1 ms apart on this host)."""
        sent = time.time()
        with self.control(1000) as ctl:
            tti = ctl.stats()["tti"]
        return {"tti": float(tti), "t_s": (sent + time.time()) / 2}

    def timing_faults(self) -> dict[str, Any]:
        """The cell restarts at every configure, so its counters are the run's."""
        with self.control(1000) as ctl:
            stats = ctl.stats()
        return {"ttis": int(stats["tti"]), "resyncs": int(stats["resyncs"]),
                "late_ttis_over_us": dict(stats["late_ttis_over_us"]), "late_max_us": int(stats["late_max_us"])}

    def stack_clock(self, lab_artifacts_dir: Path) -> StackClock:
        """The wall clock when the cell ran at real time; on a recorded clock (`clock_file`) the cell's own clock
        from the run's artifacts (the wall time each of its TTIs ran: the recording's speed and stalls, then real
        time past its end)."""
        if self.params.clock_file is None:
            return StackClock.wall()
        return StackClock.from_file(Path(lab_artifacts_dir) / CLOCK_FILE)

    def collect(self, run_dir: Path) -> dict[str, Path]:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        out: dict[str, Path] = {}
        if self.tti_log.exists():
            try:  # ask the cell to flush its buffered records first
                with self.control(1000) as ctl:
                    ctl.stats()
            except CellabError:
                pass
            dst = run_dir / "cell_tti.bin"
            join_tti_log(self.tti_log, dst)
            out["cell_tti_log"] = dst
        if self.cell_log.exists():
            dst = run_dir / "cell.log"
            join_text_log(self.cell_log, dst)
            out["cell_log"] = dst
        if self.cell_clock.exists():  # flushed by the stats request above
            dst = run_dir / CLOCK_FILE
            join_clock(self.cell_clock, dst)
            out["stack_clock_dl"] = dst
        return out

    def _remove(self) -> None:
        try:  # never a frozen process left behind (ue_pause): thawed first, while the records are there
            self.host_freezer.thaw_all()
        finally:
            self._stop_cell()
            for name in netns.listnetns():
                if name == self.srv_ns or re.fullmatch(re.escape(self.prefix) + r"-ue\d+", name):
                    try:
                        netns.remove(name)
                    except OSError:
                        pass
            shutil.rmtree(self.state_dir, ignore_errors=True)

    def down(self) -> None:
        self._remove()
        self.release_instance()

    def status(self) -> dict[str, Any]:
        names = [n for n in netns.listnetns() if n == self.srv_ns or n.startswith(self.prefix + "-ue")]
        pid = self._cell_pid()
        info: dict[str, Any] = {"prefix": self.prefix, "namespaces": sorted(names), "cell_pid": pid, "cell": None,
                                "live": instances.is_live(self.prefix)}
        if pid:
            try:
                with self.control(1000) as ctl:
                    info["cell"] = ctl.stats()
            except CellabError as exc:
                info["cell_error"] = str(exc)
        return info

    # ---- the cell process --------------------------------------------------------------------------
    def _cell_pid(self) -> int | None:
        try:
            pid = int(self.pid_file.read_text().strip())
        except (OSError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return pid if b"cellab-cell" in cmdline else None  # a recycled pid is not ours

    def _start_cell(self, program: Path) -> None:
        for log in (self.tti_log, self.cell_clock, self.cell_log):  # an earlier cell's older segments: not this one's
            older(log).unlink(missing_ok=True)
        argv = [str(program), "--srv", f"{self.srv_ns}:{TUN_NAME}"]
        for i in range(self.params.n_ues):
            argv += ["--ue", f"{self.ue_ns(i)}:{TUN_NAME}:{ue_addr(i)}"]
        argv += self.params.argv()
        argv += ["--ctl", self.ctl_endpoint, "--pub", self.pub_endpoint, "--tti-log", str(self.tti_log),
                 "--pid-file", str(self.pid_file), "--clock-out", str(self.cell_clock),
                 "--log-max-bytes", str(self.log_max_bytes), "--stdout-log", str(self.cell_log)]
        with open(self.cell_log, "wb") as log:
            # `cellab vlab up`: the cell keeps the instance's lease after the command has exited; a campaign's
            # cell dies with the session that started it (a killed worker leaves no cell running)
            keep = (self.lease.fd,) if self.cell_keeps_lease and self.lease is not None and self.lease.held else ()
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True, pass_fds=keep,
                                    preexec_fn=None if self.cell_keeps_lease else die_with_parent)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while b'"ready"' not in self.cell_log.read_bytes():
            if proc.poll() is not None:
                raise CellabError(f"cellab-cell exited: {self.cell_log.read_text(errors='replace').strip()}")
            if time.monotonic() > deadline:
                proc.kill()
                raise CellabError("cellab-cell did not become ready in time")
            time.sleep(0.02)
        self._proc = proc
        self._wire()

    def _wire(self) -> None:
        """Addresses and routes on the TUN devices the cell just opened."""
        with NetNS(self.srv_ns) as ns:
            idx = ns.link_lookup(ifname=TUN_NAME)[0]
            ns.link("set", index=idx, mtu=1500, state="up")
            ns.addr("add", index=idx, address=SERVER_ADDR, prefixlen=32)
            ns.route("add", dst=UE_NET, oif=idx)
        for i in range(self.params.n_ues):
            with NetNS(self.ue_ns(i)) as ns:
                idx = ns.link_lookup(ifname=TUN_NAME)[0]
                ns.link("set", index=idx, mtu=1500, state="up")
                ns.addr("add", index=idx, address=ue_addr(i), prefixlen=32)
                ns.route("add", dst=SERVER_NET, oif=idx)
                ns.route("add", dst="0.0.0.0/0", oif=idx)

    def _stop_cell(self) -> None:
        pid = self._cell_pid()
        proc = getattr(self, "_proc", None)
        if pid:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pid = None
            deadline = time.monotonic() + 3.0
            while pid and Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
                if proc is not None and proc.pid == pid and proc.poll() is not None:
                    break
                time.sleep(0.02)
            if pid and Path(f"/proc/{pid}").exists() and (proc is None or proc.poll() is None):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        if proc is not None:
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                pass
            self._proc = None
