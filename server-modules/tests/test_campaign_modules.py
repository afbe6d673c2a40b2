"""A virtual-lab campaign that names server modules: the runner registers the module once, sets the
parameters each run names (the rest back to the module's defaults), checks names and ranges against this
room's loader before the first run, and the server agent unloads the module at the end (root, BPF)."""

from __future__ import annotations

import json

import pytest

from cellab.testkit.helpers import only_folder, result_rows, run_cellab

VIRTUAL = """
name: vcell
lab: virtual
factors:
  scheme:
    cubic: {cc: cubic}
    scubic-bdp20: {cc: scubic, module_params: {scubic: {min_bdp_pkts: 20}}}
    scubic: {cc: scubic}
fixed: {n_prb: 25, sr_period_ms: 20, core_delay_ms: 10}
workload: {duration_s: 2, ping_interval_ms: 100}  # was 3 s: the runs test loading, not a rate
timeouts: {run_s: 60, request_s: 15}
retry: {max_attempts: 2, backoff_s: 1}
"""


def test_virtual_lab_campaign_loads_a_bpf_module_sets_its_params_per_run_and_unloads_it(
        require_root, netns_prefix, tmp_path):
    from cellab.server import modules
    from cellab.server.experiment import bpf_lock

    path = tmp_path / "v.yaml"
    path.write_text(VIRTUAL)
    out = tmp_path / "out"
    with bpf_lock():  # registered congestion controls are host-wide; other test runs take the same lock
        if "scubic" in modules.loaded():
            pytest.fail("scubic is already registered by something else; the test needs a clean host")
        result = run_cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix)
        still_loaded = modules.loaded()
    assert result.returncode == 0, result.stdout + result.stderr
    folder = only_folder(out)
    by_scheme = {}
    for run_id, *_ in result_rows(folder):
        manifest = json.loads((folder / "runs" / run_id / "manifest.json").read_text())
        metrics = json.loads((folder / "runs" / run_id / "metrics.json").read_text())
        by_scheme[manifest["factors"]["scheme"]] = (manifest, metrics)
        assert (folder / "runs" / run_id / "cell_tti.bin").stat().st_size > 0  # the cell's ground truth came back
    # this test is about the runner loading a module, setting its parameters per run and unloading it
    assert {s: m["congestion_control"] for s, (_, m) in by_scheme.items()} == {
        "cubic": "cubic", "scubic-bdp20": "scubic", "scubic": "scubic"}
    for _, metrics in by_scheme.values():  # 25 PRB at CQI 15: 18.3 Mbit/s by the TBS table, never more
        assert 12e6 < metrics["throughput_bps"] < 18.4e6
    # the run that set a parameter got it; the run after it is back on the module's default (10 packets)
    assert by_scheme["cubic"][0]["module_params"] == {}
    assert by_scheme["scubic-bdp20"][0]["module_params"]["scubic"]["min_bdp_pkts"] == 20
    assert by_scheme["scubic"][0]["module_params"]["scubic"]["min_bdp_pkts"] == 10
    assert "scubic" not in still_loaded


def test_an_unknown_module_parameter_fails_the_campaign_before_any_run(require_root, netns_prefix, tmp_path):
    # refused when the campaign is loaded (this host's loader names the parameters): no lab, no run
    path = tmp_path / "v.yaml"
    path.write_text(VIRTUAL.replace("min_bdp_pkts: 20", "min_bdp: 20"))
    out = tmp_path / "out"
    result = run_cellab("run", str(path), "--out", str(out), "--prefix", netns_prefix)
    assert result.returncode == 2
    assert "module_params.scubic.min_bdp: unknown parameter (allowed: min_bdp_pkts, ssthresh_at_exit, ttl_ms)" in \
        " ".join((result.stdout + result.stderr).split())
    assert not out.exists() or not any(out.iterdir())
