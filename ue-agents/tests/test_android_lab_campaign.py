"""A campaign on the `virtual-android` lab: the UE is a virtual phone reached by the Android agent through the
real adb client and the fake adb server; the SR validation scores as on `virtual` (root, adb, qemu)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import textwrap

import pytest

from cellab.sr_config import sr_config_index
from cellab.testkit.helpers import only_folder, run_cellab

CAMPAIGN = textwrap.dedent("""
    name: android-sr
    lab: virtual-android
    # one period: what is of the phone (the agent, adb, the probe in it) is the same at every period, and the
    # estimate's mapping to each is test_probe_live.py::test_sr_strict_estimate_maps_to_every_period[10-40]
    factors: {sr_period_ms: [40]}
    fixed: {n_prb: 25, core_delay_ms: 10, cc: cubic, receiver: exll, realtime: true}  # SR estimates: ms gaps
    workload: {tool: probe, duration_s: 2, sr_probes: 30}
    timeouts: {run_s: 90, request_s: 20}
    retry: {max_attempts: 3, backoff_s: 2}
""")


def test_sr_validation_on_virtual_phones_names_the_configured_period(require_root, netns_prefix, tmp_path):
    for program in ("adb", "qemu-aarch64-static"):
        if shutil.which(program) is None:
            pytest.fail(f"{program} is missing: `make setup` installs it")
    path = tmp_path / "c.yaml"
    path.write_text(CAMPAIGN)
    out = tmp_path / "out"
    # no report: what is checked is in the database and the run folders
    result = run_cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix, "--no-report")
    assert result.returncode == 0, result.stdout + result.stderr
    folder = only_folder(out)
    with sqlite3.connect(folder / "results.sqlite") as db:
        rows = db.execute("SELECT run_id, metrics FROM runs ORDER BY idx").fetchall()
    for run_id, metrics_text in rows:
        metrics = json.loads(metrics_text)
        manifest = json.loads((folder / "runs" / run_id / "manifest.json").read_text())
        truth = manifest["ground_truth"]
        period = manifest["params"]["sr_period_ms"]
        assert truth["source"] == "config" and truth["sr_period_ms"] == period
        assert truth["sr_config_index"] == sr_config_index(period, truth["sr_offset_ms"])
        assert metrics["sr_estimate_ms"] == period, (period, metrics.get("sr_estimate_ms"))
        assert manifest["agents"]["ue0"]["role"] == "ue"
        # the phone agent's signal log, published as telemetry and recorded on the controller's clock
        # (beside other topics the agent publishes: its UE's state, RTT)
        telemetry = folder / "runs" / run_id / "telemetry" / "ue0.jsonl"
        lines = [json.loads(line) for line in telemetry.read_text().splitlines()]
        signal = [sample for sample in lines if sample.get("topic") == "signal"]
        assert signal and all("rsrp_dbm" in sample for sample in signal)
