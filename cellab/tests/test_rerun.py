"""`cellab rerun` of a virtual-cell run: the same configuration, results within the campaign's own run-to-run
spread, a manifest equal to the original's except for time and host state, and the provenance that made it
repeatable (commit, programs, files by hash, sysctls)."""

from __future__ import annotations

import json
import textwrap

from cellab.run.rerun import manifest_differences
from cellab.testkit.helpers import only_folder, result_rows, run_cellab


def test_rerun_repeats_a_virtual_run_within_its_spread(require_root, netns_prefix, tmp_path):
    campaign = tmp_path / "c.yaml"
    campaign.write_text(textwrap.dedent("""
        name: again
        lab: virtual
        repeat: 2  # the spread of two runs: a tighter bound than three give, never a looser one
        fixed: {n_prb: 15, core_delay_ms: 10, seed: 4}
        workload: {tool: iperf3, duration_s: 2, ping_interval_ms: 100}
        timeouts: {run_s: 60, request_s: 15}
        retry: {max_attempts: 2, backoff_s: 0.2, max_late_tti_fraction: null}  # what is tested is the rerun
    """))
    done = run_cellab("run", str(campaign), "--out", str(tmp_path / "out"), "--prefix", netns_prefix, "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    folder = only_folder(tmp_path / "out")
    rows = result_rows(folder)
    run_id = rows[0][0]
    throughputs = [json.loads((folder / "runs" / r[0] / "metrics.json").read_text())["throughput_bps"] for r in rows]
    spread = max(throughputs) - min(throughputs)
    manifest = json.loads((folder / "runs" / run_id / "manifest.json").read_text())
    provenance = manifest["provenance"]
    assert len(provenance["controller"]["programs"]["cellab-cell"]) == 64 and provenance["module_objects"] == {}
    assert provenance["server_sysctls"]["net.ipv4.tcp_congestion_control"]
    assert manifest["software"]["cellab"] and "kernel" in manifest["software"]
    # the cell's binary as its process ran it: the build's hash, read through /proc/PID/exe
    running = provenance["lab"]["running"]["cellab-cell"]
    assert running["sha256"] == provenance["controller"]["programs"]["cellab-cell"], provenance["lab"]
    assert running["replaced_on_disk"] is False
    roles = sorted(a["role"] for a in provenance["agents"].values())
    assert roles == ["attenuator", "server", "ue"], provenance["agents"]
    ue = next(a for a in provenance["agents"].values() if a["role"] == "ue")
    assert ue["software"]["programs"]["cellab-probe"]["sha256"] == provenance["controller"]["programs"]["cellab-probe"]
    assert ue["cellab"] and ue["kernel"]

    again = run_cellab("rerun", str(folder / "runs" / run_id), "--out", str(tmp_path / "again"),
                       "--prefix", netns_prefix)
    assert again.returncode == 0, again.stdout + again.stderr
    new = only_folder(tmp_path / "again")
    summary = json.loads((new / "rerun.json").read_text())
    assert summary["status"] == "ok" and summary["manifest_differences"] == [], summary
    assert summary["software_differences"] == [] and "software: the same" in again.stdout, summary
    row = summary["metrics"]["throughput_bps"]
    assert abs(row["rerun"] - row["original"]) <= max(2 * spread, 0.05 * row["original"]), (row, throughputs)
    new_manifest = json.loads((new / "runs" / run_id / "manifest.json").read_text())
    assert new_manifest["provenance"]["controller"]["programs"] == provenance["controller"]["programs"]
    assert "throughput_bps" in again.stdout and "ratio" in again.stdout


def test_manifest_differences_ignore_time_and_host_state_only():
    a = {"run_id": "x", "params": {"cc": "cubic"}, "started_at": 1.0, "lab": {"kind": "virtual", "server": 1}}
    b = {"run_id": "x", "params": {"cc": "cubic"}, "started_at": 2.0, "lab": {"kind": "virtual", "server": 2}}
    assert manifest_differences(a, b) == []
    assert manifest_differences(a, b | {"params": {"cc": "bbr"}}) == ["params"]
    assert manifest_differences(a, b | {"lab": {"kind": "wired"}}) == ["lab.kind"]


def test_rerun_of_a_folder_that_is_not_a_run_is_refused(tmp_path):
    done = run_cellab("rerun", str(tmp_path), "--out", str(tmp_path / "o"))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and "is not a run folder" in said and "Traceback" not in said, said
