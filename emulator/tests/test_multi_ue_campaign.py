"""A campaign with four UEs in one virtual cell (issue 13's Show): one Cubic and three C2TCP flows at once,
each UE with its own row, artifacts and metrics; the run's Jain index and the report's UE table; the PRBs the
cell logged per UE add up to the cell's when all are backlogged; telemetry recorded per agent (root, BPF)."""

from __future__ import annotations

import json
import sqlite3
import textwrap

import numpy as np

from cellab.emulator.ttilog import read_ttilog
from cellab.sr_config import sr_config_index
from cellab.testkit.helpers import only_folder, result_rows, run_cellab

UE_NAMES = ["cubic-ue", "c2tcp-1", "c2tcp-2", "c2tcp-3"]
CAMPAIGN = textwrap.dedent("""
    name: four-ues
    lab: virtual
    fixed:
      n_prb: 25
      core_delay_ms: 10
      attenuation_db: 10
      rlc_queue: 4194304  # C2TCP next to Cubic's queue: the paper's deep buffer
      realtime: true  # SCHED_FIFO: nine busy processes share two cores with the cell
      ues:
        - {name: cubic-ue, cc: cubic}
        - {name: c2tcp-1, cc: c2tcp}
        - {name: c2tcp-2, cc: c2tcp}
        - {name: c2tcp-3, cc: c2tcp}
    workload: {tool: probe, duration_s: 8}  # C2TCP keeps all four queues full in 170-550 TTIs of 5 s (measured)
    measurements: [throughput, rtt, pcap]
    timeouts: {run_s: 150, request_s: 30}
    retry: {max_attempts: 3, backoff_s: 2}
""")


def test_four_ues_share_one_cell_with_their_own_rows_artifacts_and_fairness(require_root, netns_prefix, tmp_path):
    path = tmp_path / "four.yaml"
    path.write_text(CAMPAIGN)
    out = tmp_path / "out"
    result = run_cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix)
    assert result.returncode == 0, result.stdout + result.stderr
    folder = only_folder(out)
    ((run_id, status, *_),) = result_rows(folder)
    assert status == "ok"
    run_dir = folder / "runs" / run_id
    with sqlite3.connect(folder / "results.sqlite") as db:
        ue_rows = db.execute("SELECT ue, slot, metrics FROM ue_runs WHERE run_id = ? ORDER BY slot",
                             (run_id,)).fetchall()
    assert [r[0] for r in ue_rows] == UE_NAMES
    per_ue = {name: json.loads(metrics) for name, _, metrics in ue_rows}
    for name, m in per_ue.items():
        assert (run_dir / "ues" / name / "metrics.json").is_file()
        assert list((run_dir / "ues" / name).glob("*-summary.json")), f"{name}: no probe summary"
        assert m["throughput_bps"] > 0.5e6, (name, m["throughput_bps"])  # each got a share of the cell
    manifest = json.loads((run_dir / "manifest.json").read_text())
    truth = manifest["ground_truth"]  # the SR configuration the cell gave (its config: no RRC here)
    assert truth["source"] == "config" and truth["sr_period_ms"] == manifest["params"]["sr_period_ms"]
    assert truth["sr_config_index"] == sr_config_index(truth["sr_period_ms"], truth["sr_offset_ms"])
    assert {ue["name"]: ue["cc"] for ue in manifest["ues"]} == {
        "cubic-ue": "cubic", "c2tcp-1": "c2tcp", "c2tcp-2": "c2tcp", "c2tcp-3": "c2tcp"}
    # each UE's flows were sent with its own congestion control (the sender's per-flow summary)
    for name in per_ue:
        summary = json.loads((run_dir / "ues" / name / "sender" / "flows.jsonl").read_text().splitlines()[0])
        assert summary["cc"] == manifest["ues"][UE_NAMES.index(name)]["cc"], summary
    # C2TCP keeps its flows' delay low next to Cubic's queue (its purpose), in the same cell
    assert all(per_ue[n]["rtt_mean_ms"] < 0.6 * per_ue["cubic-ue"]["rtt_mean_ms"] for n in UE_NAMES[1:])
    assert "pcap_rtt_mean_ms" not in per_ue["cubic-ue"]  # the capture holds every UE's flows: the run's metric
    run_metrics = json.loads((run_dir / "metrics.json").read_text())
    assert "pcap_rtt_mean_ms" in run_metrics
    total = sum(m["throughput_bps"] for m in per_ue.values())
    assert run_metrics["ues"] == 4 and run_metrics["throughput_bps"] == total
    assert total < 18.4e6  # 25 PRB at CQI 15 carries 18.3 Mbit/s by the TBS table: the UEs shared one cell
    jain = run_metrics["ue_fairness_jain"]
    throughputs = np.array([m["throughput_bps"] for m in per_ue.values()])
    assert jain == (throughputs.sum() ** 2 / (4 * np.square(throughputs).sum()))
    # the cell's ground truth: in every TTI where all four queues hold data, their PRBs are the cell's 25
    log = read_ttilog(run_dir / "cell_tti.bin")
    # The log spans the cell's life: an attempt the host stalled, and between attempts the attenuator's safe
    # state (its maximum: no CQI, no PRB) while the queues still held data. So the workload's own TTIs only,
    # from the cell's clock mark. (C2TCP keeps its queues short: 5 kB each is still twice what 25 PRB carry in
    # a TTI, all four together.)
    mark = manifest["cell_clock_mark"]
    first_tti = mark["tti"] + (manifest["workload_started_at"] - mark["t_s"]) * 1000
    last_tti = mark["tti"] + (manifest["workload_finished_at"] - mark["t_s"]) * 1000
    ttis = log.per_tti("tti")[:, 0]
    # (a channel dark in the workload, CQI 0 from the attenuator's safe state, counts against the cell: the
    # controller losing its agents mid-run did that, cellab/tests/test_bus_multi.py)
    busy = log.backlogged(min_queue_bytes=5_000) & (ttis >= first_tti) & (ttis < last_tti)
    assert busy.sum() > 200, f"the four UEs were backlogged together in {busy.sum()} TTIs only"
    prbs = log.per_tti("dl_prb")[busy]
    short = np.flatnonzero(prbs.sum(axis=1) != 25)
    assert len(short) == 0, (f"{len(short)} of {busy.sum()} backlogged TTIs (log {log.n_ttis} TTIs, workload TTIs "
                             f"{first_tti:.0f}-{last_tti:.0f}) without the cell's 25 PRBs, e.g. TTI "
                             f"{ttis[busy][short[:5]]}: PRBs {prbs[short[:5]].tolist()}")
    # telemetry recorded on the controller's clock: the cell's per-UE summaries and the attenuator's values
    cell = [json.loads(line) for line in (run_dir / "telemetry" / "cell.jsonl").read_text().splitlines()]
    assert {row["ue"] for row in cell} == {0, 1, 2, 3}
    assert all(abs(row["t_s"] - cell[0]["t_s"]) < 60 for row in cell)
    timeline = run_metrics["timeline"]
    assert {f"throughput_bps.{n}" for n in UE_NAMES} <= set(timeline)
    assert {f"cqi.{n}" for n in UE_NAMES} <= set(timeline)
    report = (folder / "report.html").read_text()
    assert all(name in report for name in UE_NAMES) and "Jain index over UEs" in report
