"""Fidelity of the virtual cell against the real srsRAN stack over ZMQ, at 25 PRB and SR 20 ms: idle uplink
ping RTT (average within 25 %), a Cubic download's throughput (15 %) and the ping RTT during it (30 %),
measured on both labs back to back by cellab.fidelity.measure_in_session: one lab session each (one srsran-zmq
bring-up), the campaign runner's workloads and metrics (docs/fidelity.md; `make bench BENCH=fidelity` runs the
whole grid as campaigns).
"""

from __future__ import annotations

import os

import pytest

from cellab import fidelity
from cellab.errors import CellabError
from cellab.hostlock import SRSRAN_LOCK, host_lock
from cellab.ran.zmqlab import srsran_bin_dir

LOCK_WAIT_S = 900.0


@pytest.fixture
def srsran_ready() -> None:
    try:
        srsran_bin_dir()
    except CellabError as exc:
        pytest.skip(f"srsRAN bundle absent: {exc}")
    if os.geteuid() != 0:
        pytest.skip("the srsran-zmq lab needs root (network namespaces, TUN devices)")
    with host_lock(SRSRAN_LOCK, LOCK_WAIT_S, "fidelity test"):  # another stack finishes first; the lab
        pass                                                     # takes the lock itself


@pytest.mark.root
def test_virtual_cell_matches_srsran_at_25_prb_sr_20(srsran_ready, tmp_path):
    grid = fidelity.TEST
    measured = {lab: fidelity.measure_in_session(lab, grid, tmp_path / lab, prefix)
                for lab, prefix in ((fidelity.REAL_LAB, "fzr"), (fidelity.VIRTUAL_LAB, "fzv"))}
    rows = fidelity.fidelity_rows(fidelity.case_names(grid), measured[fidelity.REAL_LAB],
                                  measured[fidelity.VIRTUAL_LAB], deviations=())
    table = fidelity.format_table(rows)
    print(table)  # pytest -s shows the numbers
    assert [(r.case, r.metric) for r in rows] == [
        ("idle-25prb-sr20", "idle RTT avg (ms)"), ("dl-cubic-25prb", "throughput (Mbit/s)"),
        ("dl-cubic-25prb", "RTT under load avg (ms)")], table
    assert all(r.verdict == "PASS" for r in rows), table
