"""The srsran-zmq lab's radio start, mixed into the lab as StackAttach: the ZMQ broker and every srsue started
together (the broker's downlink advances only when every UE asks), each UE attached with its own IP, as many RNTIs
at the eNB, each UE's route through tun_srsue and a ping to the server behind the EPC's SGi; a UE that does not
attach fails naming its IMSI and what srsenb and the core say. The lab itself: zmqlab.py."""

from __future__ import annotations

import subprocess
import time

from cellab.errors import CellabError
from cellab.labs import netns
from cellab.labs.proc import stop_all

from .srsue_proc import TUN_NAME, SrsueError, SrsueProcess, UeSettings, find_srsue, ue_usim
from .uhd_args import SAMPLE_RATE_HZ
from .zmq_broker import BrokerProcess, ue_ports
from .zmqlab_params import ue_addr

SERVER_ADDR = "10.201.0.2"  # the server namespace's address (behind the core's SGi)
ATTACH_TIMEOUT_S = 60.0
UE_STOP_GRACE_S = 0.5
CORE_CHECK_S = 2.0  # while UEs attach: how often the core is asked whether it refused one


class StackAttach:
    """The broker and srsue of a SrsranZmqLab (its _ues, _broker, state_dir, core_ns, ue_ns_of, _enb, _core)."""

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
