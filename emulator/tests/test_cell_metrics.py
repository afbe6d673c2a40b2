"""The run metrics the cell's ground truth gives (cellab.results.metrics with a TTI log in this room's format):
capacity aligned to the workload, and combined with the probe's summary."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from cellab.emulator.ttilog import HEADER_DTYPE, MAGIC, RECORD_DTYPE, VERSION

from cellab.results.metrics import RunContext, cell_metrics, probe_run_metrics
from cellab.testkit.helpers import write_probe_summary as write_summary

T0 = 1_700_000_000.0


def write_ttilog(path: Path, capacity_bytes: np.ndarray, delivered_bytes: np.ndarray) -> Path:
    header = np.zeros(1, HEADER_DTYPE)
    header["magic"], header["version"], header["rec_size"], header["n_ues"], header["n_prb"] = (
        MAGIC, VERSION, RECORD_DTYPE.itemsize, 1, 25)
    rec = np.zeros(capacity_bytes.size, RECORD_DTYPE)
    rec["tti"] = np.arange(capacity_bytes.size)
    rec["dl_capacity_bytes"] = capacity_bytes
    rec["dl_delivered_bytes"] = delivered_bytes
    path.write_bytes(header.tobytes() + rec.tobytes())
    return path


def test_cell_capacity_is_aligned_to_the_workload(tmp_path):
    # 1000 TTIs before the workload at 1000 B/ms, then 2000 TTIs at 2000 B/ms: only the latter count
    cap = np.r_[np.full(1000, 1000), np.full(2000, 2000)].astype(np.uint16)
    log = write_ttilog(tmp_path / "tti.bin", cap, cap // 2)
    m = cell_metrics(log, {"tti": 1000.0, "t_s": T0}, T0, span_s=2.0)
    assert m["capacity_bps"] == pytest.approx(2000 * 8 * 1000)
    assert m["cell_delivered_bps"] == pytest.approx(1000 * 8 * 1000)
    series = m["timeline"]["capacity_bps"]
    assert len(series["t_s"]) == 20 and set(series["v"]) == {2000 * 8 * 1000}


def test_probe_run_metrics_combines_and_scores_sr(tmp_path):
    summary = write_summary(tmp_path / "s.json", [8e6], [None], {"regime": "sr-limited", "period_ms": 40})
    ms_log = tmp_path / "ms.csv"
    ms_log.write_text("ms,flow,bytes,packets,acks,rtt_mean_us,rwnd_bytes\n" + "".join(
        f"{int((T0 + 0.5) * 1000) + i},0,1000,1,1,,0\n" for i in range(1000)))
    cap = np.full(3000, 2000, np.uint16)
    log = write_ttilog(tmp_path / "tti.bin", cap, cap)
    m = probe_run_metrics({"probe-summary": summary, "probe-ms": ms_log, "cell_tti_log": log},
                          RunContext(t0_s=T0, duration_s=1.0, cell_mark={"tti": 0.0, "t_s": T0}, sr_true_ms=20))
    assert m["sr_true_ms"] == 20 and m["sr_estimate_ms"] == 40.0 and m["sr_correct"] is False
    assert m["utilization"] == pytest.approx(8e6 / 16e6)
    assert m["throughput_series_bps"] == pytest.approx([8e6] * 10)  # the 1 s transfer, not the idle bins around it
    assert m["rtt_mean_ms"] == 41.0 and m["rtt_source"] == "receiver"
    assert set(m["timeline"]) == {"throughput_bps", "capacity_bps"}


def test_an_enb_restart_has_each_ues_own_throughput_recovery(tmp_path):
    """Two UEs at 10 Mbit/s; the eNB down 2.0..2.5 s: UE 0 re-attaches at 2.6 and carries its rate again from
    2.7, UE 1 at 3.2 and from 3.4 (the cell's events and TTI log, as the virtual lab writes them)."""
    import json

    from cellab.faults.spec import FaultSpec
    from cellab.results.metrics import fault_run_metrics

    ttis = 6000
    header = np.zeros(1, HEADER_DTYPE)
    header["magic"], header["version"], header["rec_size"], header["n_ues"], header["n_prb"] = (
        MAGIC, VERSION, RECORD_DTYPE.itemsize, 2, 25)
    rec = np.zeros(2 * ttis, RECORD_DTYPE)
    rec["tti"], rec["ue"] = np.repeat(np.arange(ttis), 2), np.tile([0, 1], ttis)
    t = rec["tti"] / 1000.0
    back = np.where(rec["ue"] == 0, 2.7, 3.4)
    rec["dl_delivered_bytes"] = np.where((t >= 2.0) & (t < back), 0, 1250)
    rec["dl_drop_bytes"] = np.where((rec["ue"] == 1) & (rec["tti"] == 2001), 30_000, 0)
    (tmp_path / "tti.bin").write_bytes(header.tobytes() + rec.tobytes())
    events = [("enb_down", None, 2000), ("rlf", 0, 2200), ("rlf", 1, 2210), ("enb_up", None, 2500),
              ("connect_complete", 0, 2600), ("connect_complete", 1, 3200)]
    (tmp_path / "cell.log").write_text("".join(json.dumps(
        {"event": name, "tti": tti, **({"ue": ue} if ue is not None else {})}) + "\n" for name, ue, tti in events))
    (row,) = fault_run_metrics([FaultSpec(kind="enb_restart", at_s=2.0, duration_s=0.5)], [],
                               {"cell_log": tmp_path / "cell.log", "cell_tti_log": tmp_path / "tti.bin"},
                               {"tti": 0.0, "t_s": T0}, T0, 6.0, None)
    assert (row["ue"], row["start_s"], row["end_s"]) == (0, pytest.approx(2.0), pytest.approx(2.5))
    assert row["reattach_s"] == pytest.approx(2.6) and row["throughput_back_s"] == pytest.approx(2.7) and row["lost_bytes"] == 0
    (other,) = row["other_ues"]
    assert other["ue"] == 1 and other["rlf_s"] == pytest.approx(2.21) and other["reattach_s"] == pytest.approx(3.2)
    assert other["throughput_back_s"] == pytest.approx(3.4) and other["recovery_s"] == pytest.approx(0.9)
    assert other["lost_bytes"] == 30_000 and other["longest_stall_s"] == pytest.approx(1.4, abs=0.002)
