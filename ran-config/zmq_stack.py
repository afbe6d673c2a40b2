"""The srsran-zmq radio of a rehearsal lab (`cellab rehearse up NAME --radio srsran-zmq`, issue 40): what the
embedded lab builds (SrsranZmqLab.up: the srsRAN host lock, the namespaces, the attenuation control socket), with
srsenb and the EPC left to the inventory's eNB and core agents, as on a hardware lab. This process (`cellab ran
zmq-stack`, in the foreground until SIGTERM) supervises the rest, the part a hardware lab's phones are:

- srsenb is watched in the core namespace (whoever started it: the eNB agent's configure); when one starts, the
  ZMQ broker and every srsue are started for its cell (its n_prb, read from the enb.conf it runs), each UE's
  default route put through its TUN once it attached;
- when srsenb goes (the eNB agent's safe_state: a campaign's end, an enb_restart fault), the broker and srsue are
  stopped, and started afresh with the next srsenb, as the embedded lab restarts them with srsenb. They cannot
  stay: after srsenb's graceful stop srsEPC no longer knows the UE, rejects its Service Request, and srsue's fresh
  attach over the kept ZMQ link never completes (measured: T3410 expired, 2026-11-29); a new broker under a
  running srsenb gets no samples from it. A srsue that exits, or does not attach within ATTACH_TIMEOUT_S, is
  started again with the broker;
- every step is a line of `stack_events.jsonl` ({t_s wall, event, ...}: srsenb_up, srsenb_gone, radio_stopped,
  radio_started with `why`, ue_attached) and of this process's output;
- the broker records the stack clock from its start (`clock/N/stack-clock-{dl,ul}.bin`, N per broker start), so
  a run's times read on the stack's own seconds too, within the labs' log bound (zmq_stack_clock).

SIGTERM: the radio stopped, the namespaces removed, the lock released (SrsranZmqLab.down)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import yaml

from cellab.envvars import lab_log_max_bytes
from cellab.labs import instances, netns

from .srsue_proc import TUN_NAME, SrsueProcess, UeSettings, find_srsue
from .uhd_args import SAMPLE_RATE_HZ
from .zmq_broker import BrokerProcess, ue_ports
from .zmq_stack_clock import ClockFolders
from .zmqlab import SrsranZmqLab
from .zmqlab_attach import ATTACH_TIMEOUT_S, SERVER_ADDR
from .zmq_stack_control import NO_SIGNAL_DBM, StackControl, last_metrics
from .zmqlab_params import CORE_PROFILE, ENB_PROFILE, subscribers_csv

POLL_S = 0.5
N_PRB_RE = re.compile(r"^\s*n_prb\s*=\s*(\d+)", re.M)


@dataclass(frozen=True)
class Seen:
    """A process found in the core namespace: pid and start time (clock ticks since boot)."""
    pid: int
    ticks: int


def _netns_inode(name: str) -> int:
    return os.stat(f"/run/netns/{name}").st_ino


def find_in_netns(programs: tuple[str, ...], inode: int) -> Seen | None:
    """The newest live process named one of `programs` in the namespace of `inode`."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "comm").read_text().strip() not in programs or os.stat(entry / "ns" / "net").st_ino != inode:
                continue
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if fields[0] not in ("Z", "X"):
            found.append(Seen(int(entry.name), int(fields[19])))
    return max(found, key=lambda s: s.ticks) if found else None


def running_n_prb(pid: int) -> int | None:
    """The cell size of the srsenb `pid` from the enb.conf on its command line (the eNB agent's rendering)."""
    try:
        argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        conf = next(Path(a.decode()) for a in argv if a.endswith(b".conf"))
        found = N_PRB_RE.search(conf.read_text())
    except (OSError, StopIteration, UnicodeDecodeError):
        return None
    return int(found.group(1)) if found else None


class ZmqStack:
    """One rehearsal's srsran-zmq radio in `folder` (srsue's and the broker's files per start N: ueI-N, broker-N, clock/N; the events)."""

    def __init__(self, folder: Path, ues: int, bin_dir: Path | None = None, prefix: str | None = None):
        self.folder = folder
        self.lab = SrsranZmqLab(prefix or "czq", bin_dir, ues)  # (a free prefix is claimed in up() without one)
        self._own_prefix = prefix is None
        self.lab.state_dir = folder
        self.lab._cell_att_db = 0.0  # srsenb's cell_gain stays its profile's: a UE's attenuation is its broker gain
        self._core_inode = 0
        self.enb: Seen | None = None
        self.last_enb_pid: int | None = None  # the srsenb before this one, if any
        self.n_prb: int | None = None
        self.attaching: dict[int, float] = {}  # UE -> deadline of its attach
        self.starts = 0
        self.clock = ClockFolders(folder / "clock")

    def up(self) -> dict:
        """Lock, namespaces, attenuation control; the eNB profile and subscribers the inventory names."""
        if self._own_prefix:
            lease = instances.allocate("srsran-zmq", "rehearsal")
            self.lab.prefix, self.lab.lease = lease.prefix, lease
        topo = self.lab.up()
        self._core_inode = _netns_inode(self.lab.core_ns)
        self.lab._attenuation.stop()  # the lab's control socket, in place on its endpoint with the UEs' state too
        self.lab._attenuation = StackControl(self.lab.attenuation_endpoint, self.lab.n_ues,
                                             self.lab.set_ue_attenuation, lambda ue: self.lab._ue_att_db[ue],
                                             self.ue_stats)
        n_prb = int(yaml.safe_load(ENB_PROFILE.read_text())["enb"]["n_prb"])
        (self.folder / "enb.yaml").write_text("# the srsran-zmq lab's eNB profile, its ZMQ stream at the cell's own "
                                              "rate (cellab ran zmq-stack)\n" + self.lab._enb_profile_yaml(n_prb))
        (self.folder / "subscribers.csv").write_text(subscribers_csv(self.lab.n_ues))
        return {"ready": True, "prefix": self.lab.prefix, "core_ns": self.lab.core_ns, "srv_ns": self.lab.srv_ns,
                "ue_ns": [h.netns for h in topo.ues], "server": SERVER_ADDR,
                "attenuation_ctl": self.lab.attenuation_endpoint, "srsran_bin": str(self.lab.bin_dir),
                "enb_profile": str(self.folder / "enb.yaml"), "core_profile": str(CORE_PROFILE),
                "subscribers": str(self.folder / "subscribers.csv"), "lock_wait_s": round(self.lab.lock_wait_s, 1)}

    def ue_stats(self, ue: int) -> dict:
        """UE `ue` as the virtual cell's `stats` has it: connected while its srsue runs attached, its RSRP and SNR
        from srsue's newest metrics (the control socket's thread: reads only)."""
        ues = list(self.lab._ues)
        proc = ues[ue] if ue < len(ues) else None
        attached = proc is not None and proc.running() and ue not in self.attaching
        metrics = last_metrics(proc.metrics) if attached else {}
        return {"ue": ue, "rrc_state": "connected" if attached else "idle",
                "rsrp_dbm": metrics.get("rsrp", NO_SIGNAL_DBM), "sinr_db": metrics.get("dl_snr")}

    def note(self, event: str, **fields: object) -> None:
        row = {"t_s": round(time.time(), 3), "event": event, **fields}
        with open(self.folder / "stack_events.jsonl", "a") as out:
            out.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)

    # ---- supervision ---------------------------------------------------------------------------
    def step(self) -> None:
        """One look at srsenb, the EPC and the UEs; acts on what changed."""
        enb = find_in_netns(("srsenb",), self._core_inode)
        if enb is None:
            if self.enb is not None:
                self.note("srsenb_gone", pid=self.enb.pid)
                self.last_enb_pid, self.enb = self.enb.pid, None
                self.attaching.clear()
                self.lab._stop_radio()
                self.note("radio_stopped", why="srsenb gone", stopped=["zmq-broker", "srsue"])
            return
        if enb != self.enb:
            if self.enb is not None:
                self.last_enb_pid = self.enb.pid
            self.enb = enb
            n_prb = running_n_prb(enb.pid) or self.n_prb or 25
            self.note("srsenb_up", pid=enb.pid, n_prb=n_prb)
            self.start_radio("srsenb started" if self.last_enb_pid is None else
                             f"srsenb restarted (pid {self.last_enb_pid} -> {enb.pid})", n_prb)
        self._check_attaching()
        if self.lab._broker is not None and self.lab._broker.running():
            self.clock.bound(self.lab._broker, lab_log_max_bytes())
        exited = [ue.index for ue in self.lab._ues if not ue.running()]
        if exited and not self.attaching:
            self.start_radio(f"srsue {', '.join(map(str, exited))} exited: {self.lab._ues[exited[0]].error_line()}")

    def start_radio(self, why: str, n_prb: int | None = None) -> None:
        """The broker and every srsue (re)started for the running cell, the stack clock recorded from the broker's
        start; each UE's attach is then watched (step)."""
        self.lab._stop_radio()
        self.n_prb = n_prb or self.n_prb or 25
        self.starts += 1
        self.note("radio_started", why=why, restarted=["zmq-broker", "srsue"], start=self.starts, n_prb=self.n_prb)
        srate_hz = SAMPLE_RATE_HZ[self.n_prb]
        broker = BrokerProcess(self.folder / f"broker-{self.starts}", self.lab.n_ues, netns=self.lab.core_ns, srate_hz=srate_hz,
                               dl_gains_db=self.lab._broker_gains_db(), ul_gains_db=self.lab._broker_ul_gains_db())
        broker.start()
        self.lab._broker = broker
        self.clock.begin(broker, self.starts)
        settings = UeSettings(n_prb=self.n_prb, base_srate_hz=srate_hz)
        binary = find_srsue(self.lab.bin_dir)
        for i in range(self.lab.n_ues):
            ue = SrsueProcess(binary, self.folder / f"ue{i}-{self.starts}", settings, netns=self.lab.core_ns,
                              ue_netns=self.lab.ue_ns_of(i), index=i, ports=ue_ports(i))
            ue.start()
            self.lab._ues.append(ue)
            self.attaching[i] = time.monotonic() + ATTACH_TIMEOUT_S

    def _check_attaching(self) -> None:
        for i, deadline in list(self.attaching.items()):
            ue = self.lab._ues[i]
            ip = ue.attached_ip()
            if ip is not None:
                subprocess.run(netns.in_netns(self.lab.ue_ns_of(i), ["ip", "route", "replace", "default", "dev",
                                                                     TUN_NAME]), capture_output=True, check=False)
                self.note("ue_attached", ue=i, ip=ip, start=self.starts)
                del self.attaching[i]
            elif time.monotonic() > deadline:
                self.attaching.clear()
                self.start_radio(f"srsue {i} did not attach within {ATTACH_TIMEOUT_S:g} s")
                return

    def serve(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.step()
            stop.wait(POLL_S)

    def down(self) -> None:
        if self.lab._broker is not None and self.lab._broker.running():
            try:
                self.lab._broker.clock_stop()  # the clock files complete on disk
            except Exception as exc:  # noqa: BLE001 - going down regardless; said
                print(f"zmq-stack: clock_stop: {exc}", flush=True)
        self.lab.down()


def run_stack(folder: Path, ues: int, bin_dir: Path | None, prefix: str | None) -> None:
    """`cellab ran zmq-stack`: up, a JSON ready line on stdout, supervised until SIGTERM or SIGINT, then down."""
    folder.mkdir(parents=True, exist_ok=True)
    stack = ZmqStack(folder, ues, bin_dir, prefix)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    try:
        print(json.dumps(stack.up()), flush=True)
        stack.serve(stop)
    finally:
        stack.down()
        print(json.dumps({"down": True, "prefix": stack.lab.prefix}), flush=True)
