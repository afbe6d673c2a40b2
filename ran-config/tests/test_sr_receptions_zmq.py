"""The eNB's own SR receptions on the real stack (srsran-zmq): at SR 10 and 40 ms the eNB agent reads srsenb's
PUCCH SR flags, and each run records the effective pattern beside the configured period. The receptions lie
on the configured grid; where the UE's effective period differs from the configured one, the run names the
difference (period, unused occasions, spacing). Skipped, saying why, without the srsRAN bundle or root."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cellab.ran.zmqlab import default_core

from .conftest import LOCK_WAIT_S, run_zmq_campaign






@pytest.mark.root
@pytest.mark.timeout(LOCK_WAIT_S + 600)
# one srsRAN bring-up each (a new SR period restarts the stack, 40-45 s a period on this host): both in make
# bench BENCH=extended; make test checks the reading of srsenb's PUCCH lines and the effective pattern on
# recorded lines (test_sr_receptions.py)
@pytest.mark.extended
@pytest.mark.parametrize("period_ms", [10, 40])
def test_enb_sr_receptions_at_10_and_40_ms(bundle: Path, tmp_path: Path, period_ms: int):
    folder, runs, log = run_zmq_campaign(bundle, tmp_path, (
        "name: zmq-sr-receptions\nlab: srsran-zmq\nrepeat: 1\n"
        f"fixed: {{n_prb: 25, cc: cubic, attenuation_db: 0, receiver: exll, sr_period_ms: {period_ms}}}\n"
        "workload: {tool: probe, duration_s: 2, sr_probes: 20}\n"
        "timeouts: {run_s: 150, request_s: 20}\nretry: {max_attempts: 1, backoff_s: 0, min_stack_speed: null}\n"),
        "zqs")
    assert [status for _, status, *_ in runs] == ["ok"], (runs, log)
    seen = {}
    for run_id, *_ in runs:
        run_dir = folder / "runs" / run_id
        truth = json.loads((run_dir / "manifest.json").read_text())["ground_truth"]
        # the record names the lab's core and its version, as the daemons said it (Open5GS when installed)
        core = truth["core"]
        assert core["flavour"] == default_core() and core["version"].startswith(
            {"open5gs": "Open5GS v", "srsepc": "srsEPC"}[core["flavour"]]), core
        period = truth["sr_period_ms"]
        eff = truth["effective"]["ue0"]  # the eNB saw this UE's SR occasions during the run
        assert eff["configured_ms"] == period and eff["opportunities"] > 0 and eff["receptions"] >= 3, eff
        ttis = json.loads((run_dir / "sr_effective.json").read_text())["ue0"]["sr_ttis"]
        # every reception on the configured grid (one SR offset): their spacings are multiples of the period
        assert all((b - a) % period == 0 for a, b in zip(ttis, ttis[1:], strict=False)), ttis[:40]
        if eff["period_ms"] != period:  # the run names the difference: the UE's period and what it left unused
            assert eff["period_ms"] % period == 0 and truth["sr_effective_ms"] == eff["period_ms"], eff
        metrics = json.loads((run_dir / "metrics.json").read_text())
        assert metrics["sr_effective_ms"] == eff["period_ms"] and metrics["sr_outcome"] in ("right", "wrong",
                                                                                            "no-answer"), metrics
        assert metrics["sr_outcome"] != "wrong" or not metrics.get("sr_ambiguous"), metrics
        # read on the stack's own clock (the broker's record): a wrong period there is a bug, not the host's speed
        assert metrics["sr_clock"] == "stack" and metrics["sr_outcome"] != "wrong", metrics
        seen[period] = (eff["period_ms"], eff["receptions"], eff["unused"], eff["spacing_ms"], eff.get("tti_per_s"),
                        metrics.get("sr_estimate_ms"), metrics.get("sr_candidates_ms"))
    assert sorted(seen) == [period_ms], seen
    for period, row in seen.items():
        print(f"SR {period} ms: effective {row[0]} ms, {row[1]} receptions, {row[2]} unused, spacing {row[3]}, "
              f"{row[4]} TTI/s; estimate {row[5]} candidates {row[6]}")
