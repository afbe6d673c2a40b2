"""Hostile campaigns that validated and could not work: a fault on a UE the run does not have, a stopping rule on
a metric the runs never report (each cell would silently run its maximum), and radio parameters that turn the
lab's eNB profile into one srsenb refuses (an SR offset past its period, an EARFCN in no band or a carrier
sticking out of it). Each is refused by `load_campaign`/`plan` naming the campaign and the field."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from cellab.bus.keys import generate_keypair
from cellab.campaign.load import load_campaign, plan
from cellab.errors import InputError, InputErrors
from cellab.testkit.helpers import run_cellab

ROOT = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def refused(path: Path) -> str:
    with pytest.raises((InputError, InputErrors)) as info:
        plan(load_campaign(path), path)
    return str(info.value)


def virtual(**extra: object) -> dict:
    return {"name": "c", "lab": "virtual", "workload": {"tool": "probe", "duration_s": 10}} | extra


# ------------------------------------------------------------------ faults on UEs the run lacks
OUTAGE_UE2 = {"p": [{"kind": "radio_outage", "at_s": 2, "duration_s": 1, "ue": 2}]}


@pytest.mark.parametrize("case, data, field", [
    ("one-ue", virtual(faults=OUTAGE_UE2, fixed={"faults": "p"}), "faults.p[0].ue"),
    ("two-ues", virtual(faults=OUTAGE_UE2, fixed={"faults": "p", "ues": 2}), "faults.p[0].ue"),
    ("some-runs", virtual(faults=OUTAGE_UE2, fixed={"faults": "p"}, factors={"ues": [1, 3]}), "faults.p[0].ue"),
    ("pause", virtual(faults={"q": [{"kind": "ue_pause", "at_s": 2, "duration_s": 1, "ue": 1}]},
                      factors={"faults": ["none", "q"]}), "faults.q[0].ue"),
    ("named-ues", virtual(faults=OUTAGE_UE2, fixed={"faults": "p", "ues": [{"name": "a"}, {"name": "b"}]}),
     "faults.p[0].ue"),
])
def test_a_fault_on_a_ue_the_run_lacks_is_refused(tmp_path, case, data, field):
    message = refused(write(tmp_path, data))
    assert "c.yaml" in message and field in message, message


def test_a_fault_on_a_ue_every_run_has_is_planned(tmp_path):
    path = write(tmp_path, virtual(faults=OUTAGE_UE2, fixed={"faults": "p", "ues": 3}))
    assert len(plan(load_campaign(path), path)) == 1


def test_an_unused_plan_is_not_checked_against_runs(tmp_path):
    """A plan no run picks injects nothing: its UE cannot be wrong for a run."""
    path = write(tmp_path, virtual(faults=OUTAGE_UE2))
    assert len(plan(load_campaign(path), path)) == 1


# ------------------------------------------------------------------ stopping rules on metrics never reported
@pytest.mark.parametrize("case, data, field", [
    ("owd-with-iperf3", virtual(workload={"tool": "iperf3", "duration_s": 10},
                                until={"metric": "owd_mean_ms", "ci_fraction": 0.1, "max": 5}), "until.metric"),
    ("owd-p95-with-iperf3", virtual(workload={"tool": "iperf3", "duration_s": 10},
                                    until={"metric": "owd_p95_ms", "ci_fraction": 0.1, "max": 5}), "until.metric"),
    ("ue-fairness-one-ue", virtual(until={"metric": "ue_fairness_jain", "ci_fraction": 0.1, "max": 5}),
     "until.metric"),
    ("ue-fairness-some-one-ue", virtual(factors={"ues": [1, 2]},
                                        until={"metric": "ue_fairness_jain", "ci_fraction": 0.1, "max": 5}),
     "until.metric"),
    ("utilization-no-cell", {"name": "c", "lab": "wired", "workload": {"tool": "iperf3", "duration_s": 5},
                             "until": {"metric": "utilization", "ci_fraction": 0.1, "max": 5}}, "until.metric"),
    ("repeat-rule-form", virtual(workload={"tool": "iperf3", "duration_s": 10},
                                 repeat={"min": 2, "max": 5, "metric": "owd_mean_ms", "ci_fraction": 0.1}),
     "until.metric"),
    ("comparison-metric", virtual(workload={"tool": "iperf3", "duration_s": 10}, repeat=2,
                                  factors={"cc": ["cubic", "bbr"]},
                                  comparisons={"bbr-vs-cubic": {"factor": "cc", "level": "bbr", "baseline": "cubic",
                                                                "metrics": ["owd_p95_ms"]}},
                                  until={"comparison": "bbr-vs-cubic", "ci_fraction": 0.1, "max": 5}),
     "comparisons.bbr-vs-cubic.metrics"),
])
def test_a_stopping_rule_on_a_metric_never_reported_is_refused(tmp_path, case, data, field):
    message = refused(write(tmp_path, data))
    assert "c.yaml" in message and field in message, message


@pytest.mark.parametrize("metric, extra", [("owd_mean_ms", {}), ("utilization", {}),
                                           ("ue_fairness_jain", {"fixed": {"ues": 2}}),
                                           ("throughput_bps", {})])
def test_a_stopping_rule_on_a_reported_metric_is_planned(tmp_path, metric, extra):
    path = write(tmp_path, virtual(until={"metric": metric, "ci_fraction": 0.1, "max": 5}, **extra))
    assert plan(load_campaign(path), path)


# ------------------------------------------------------------------ radio parameters against the eNB profile
@pytest.fixture
def zmq_lab(tmp_path) -> Path:
    """runs/labs/srsran-zmq.yaml with the profiles it names at the same relative places, keys made."""
    for folder in ("runs/labs", "ran-config/examples", "core-config/examples"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    for name in ("controller", "enb1", "core1", "server1", "phone1"):
        generate_keypair(tmp_path / "runs" / "labs" / "keys", name)
    return tmp_path / "runs" / "labs" / "srsran-zmq.yaml"


def on_lab(lab: Path, **fixed: object) -> dict:
    return {"name": "c", "lab": str(lab), "fixed": fixed, "workload": {"tool": "iperf3", "duration_s": 5}}


@pytest.mark.parametrize("case, fixed", [
    ("sr-offset-past-profile-period", {"sr_offset_ms": 25}),  # the profile's SR period is 20 ms
    ("sr-offset-past-its-period", {"sr_period_ms": 5, "sr_offset_ms": 7}),
    ("earfcn-in-no-band", {"dl_earfcn": 4000}),
    ("carrier-out-of-band", {"dl_earfcn": 2751}),
    ("wide-carrier-at-edge", {"n_prb": 50, "dl_earfcn": 2790}),
])
def test_radio_parameters_the_profile_cannot_take_are_refused(tmp_path, zmq_lab, case, fixed):
    message = refused(write(tmp_path, on_lab(zmq_lab, **fixed)))
    assert "c.yaml" in message and "zmq-25prb.yaml" in message, message


def test_radio_parameters_the_profile_takes_are_planned(tmp_path, zmq_lab):
    path = write(tmp_path, on_lab(zmq_lab, sr_period_ms=10, sr_offset_ms=7, dl_earfcn=3100))
    [run] = plan(load_campaign(path), path)
    assert run.params["sr_offset_ms"] == 7


def test_validate_refuses_without_a_traceback(tmp_path, zmq_lab):
    result = run_cellab("validate", str(write(tmp_path, on_lab(zmq_lab, sr_period_ms=5, sr_offset_ms=7))))
    assert result.returncode != 0 and "Traceback" not in result.stdout + result.stderr
    assert "c.yaml" in result.stdout + result.stderr
