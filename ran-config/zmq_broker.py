"""cellab-zmq-broker (broker/zmq_broker.c) supervised by the srsran-zmq lab when it runs several UEs: srsenb's
ZMQ ports stay 2000 (tx) / 2001 (rx), the broker sits on them and serves UE i on ports 2100+2i (its rx) and
2101+2i (its tx). Ready on its "ready" line; its stats lines (JSON, sample rates moved) stay in its log."""

from __future__ import annotations

import json
import time
from pathlib import Path

from cellab.errors import CellabError
from cellab.paths import find_program
from cellab.proc import ManagedProcess

ENB_TX_PORT, ENB_RX_PORT = 2000, 2001  # the eNB profile's rf.device ports
UE_PORT_BASE = 2100
READY_TIMEOUT_S = 5.0
STATS_PERIOD_S = 2.0


def ue_ports(index: int) -> tuple[int, int]:
    """(rx, tx) ZMQ ports of UE `index` when the broker is between it and srsenb."""
    return UE_PORT_BASE + 2 * index, UE_PORT_BASE + 2 * index + 1


def broker_argv(binary: Path, n_ues: int, dl_gains_db: list[float] | None = None) -> list[str]:
    """dl_gains_db: UE i's downlink copy scaled by dl_gains_db[i] dB (-100..0; per-UE attenuation)."""
    local = "tcp://127.0.0.1:{}".format
    argv = [str(binary), "--enb-tx", local(ENB_TX_PORT), "--enb-rx", local(ENB_RX_PORT),
            "--stats-s", str(STATS_PERIOD_S)]
    for i in range(n_ues):
        rx, tx = ue_ports(i)
        gain = dl_gains_db[i] if dl_gains_db else 0.0
        argv += ["--ue", f"rx={local(rx)},tx={local(tx)}" + (f",dl_gain_db={gain:g}" if gain else "")]
    return argv


class BrokerProcess:
    """One broker in the stack's namespace (where srsenb's and the UEs' ZMQ ports are)."""

    def __init__(self, work_dir: Path, n_ues: int, *, netns: str | None, dl_gains_db: list[float] | None = None):
        self.work_dir, self.n_ues, self.netns = work_dir, n_ues, netns
        self.dl_gains_db = list(dl_gains_db) if dl_gains_db else [0.0] * n_ues
        self.log = work_dir / "zmq_broker.log"
        self.proc: ManagedProcess | None = None

    def start(self) -> None:
        self.work_dir.mkdir(parents=True, exist_ok=True)
        argv = broker_argv(find_program("cellab-zmq-broker"), self.n_ues, self.dl_gains_db)
        self.proc = ManagedProcess(argv, self.log, netns=self.netns)
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
        try:
            return self.log.read_text(errors="replace")
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
        """Its stats lines: {t_s, dl_msps, ul_msps, dl_blocks, ul_blocks} every STATS_PERIOD_S."""
        out = []
        for line in self.text().splitlines():
            if line.startswith("{"):
                try:
                    out.append(json.loads(line))
                except ValueError:  # a line cut by a kill
                    continue
        return out

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.stop(grace_s=1.0)
