"""How a run scores the probe's SR answer: no answer (ambiguous, with candidates) apart from a wrong one, against
the configured period and against the eNB's effective one (sr_effective.json from the srsran-zmq lab)."""

from __future__ import annotations

import json
from pathlib import Path

from cellab.results.metrics import RunContext, probe_run_metrics


def _summary(tmp_path: Path, period: int | None, candidates: list[int], sent: int = 45) -> Path:
    path = tmp_path / "probe-summary.json"
    path.write_text(json.dumps({
        "status": "ok", "flows": [], "requests": [], "total_bytes": 0,
        "uplink_probes": {"requested": 30, "budget": 60, "sent": sent, "received": sent},
        "sr_estimate": {"regime": "not-sr-limited", "period_ms": period, "confidence": "high" if period else "none",
                        "source": "uplink-probes", "ambiguous": bool(candidates), "candidates_ms": candidates}}))
    return path


def _effective(tmp_path: Path, period: int) -> Path:
    path = tmp_path / "sr_effective.json"
    path.write_text(json.dumps({"ue0": {"rnti": 70, "period_ms": period, "configured_ms": 10, "unused": 7,
                                        "tti_per_s": 494.1, "receptions": 48}}))
    return path


def test_ambiguous_is_no_answer_not_wrong(tmp_path: Path):
    m = probe_run_metrics({"probe-summary": _summary(tmp_path, None, [10, 20], sent=60),
                           "sr-effective": _effective(tmp_path, 10)}, RunContext(t0_s=0, duration_s=2, sr_true_ms=10))
    assert "sr_estimate_ms" not in m and m["sr_ambiguous"] is True and m["sr_candidates_ms"] == [10.0, 20.0]
    assert m["sr_correct"] is False and m["sr_outcome"] == "no-answer" and m["sr_outcome_effective"] == "no-answer"
    assert (m["sr_probes_used"], m["sr_probe_budget"]) == (60, 60)
    assert (m["sr_effective_ms"], m["sr_stack_tti_per_s"], m["sr_unused_occasions"]) == (10.0, 494.1, 7)


def test_right_against_one_truth_wrong_against_the_other(tmp_path: Path):
    # the UE used every other occasion (effective 20) while 10 was configured: the estimate 20 is right there
    m = probe_run_metrics({"probe-summary": _summary(tmp_path, 20, []), "sr-effective": _effective(tmp_path, 20)},
                          RunContext(t0_s=0, duration_s=2, sr_true_ms=10))
    assert m["sr_estimate_ms"] == 20.0 and m["sr_ambiguous"] is False
    assert (m["sr_correct"], m["sr_outcome"]) == (False, "wrong")
    assert (m["sr_correct_effective"], m["sr_outcome_effective"]) == (True, "right")


def test_no_effective_truth_without_the_enb_receptions(tmp_path: Path):
    m = probe_run_metrics({"probe-summary": _summary(tmp_path, 10, [])}, RunContext(t0_s=0, duration_s=2,
                                                                                      sr_true_ms=10))
    assert m["sr_outcome"] == "right" and "sr_effective_ms" not in m and "sr_correct_effective" not in m
