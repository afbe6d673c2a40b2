"""The campaign's faults and stopping-rule sections, fuzzed (issue 42): a campaign that is valid elsewhere gets a
random or hostile `faults` section (plans, fault kinds, times, UEs, daemons), runs that pick plans, a `ues`
count, and a random `until`, `repeat` rule or `comparisons` section. Whatever the structure, loading and planning
it ends in the plan or in a CellabError (the project's own, naming the field): never another exception. The
structures mix values close to valid ones (so the cross checks run: UEs the runs lack, metrics never reported)
with anything JSON holds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cellab.campaign.rules import STOP_METRICS
from cellab.errors import CellabError
from cellab.faults.spec import CORE_DAEMONS, FAULT_KINDS
from cellab.testkit.fuzzing import FUZZ, json_values, write_file

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)

LABS = ["virtual", "wired", "srsran-zmq", "bench", "nosuch", "lab.yaml"]
PLAN_NAMES = st.sampled_from(["p", "q", "none", "", "../x", "a b", "p\0", "π"]) | st.text(max_size=8)
numbers = st.one_of(st.integers(min_value=-3, max_value=40), st.floats(allow_nan=True), st.integers(),
                    st.sampled_from(["1", "x", None, True, [], {}]))


SECTIONS_FUZZ = settings(FUZZ, max_examples=80)  # each example plans a campaign: ~0.3 s on a busy host


def near(choices: list[object]) -> st.SearchStrategy:
    """A valid choice most of the time, anything JSON holds otherwise."""
    return st.one_of(st.sampled_from(choices), json_values)


fault = st.fixed_dictionaries(
    {"kind": near(list(FAULT_KINDS)), "at_s": numbers, "duration_s": numbers},
    optional={"ue": numbers, "daemon": near(list(CORE_DAEMONS)), "extra": json_values},
)
faults_section = st.one_of(st.dictionaries(PLAN_NAMES, st.one_of(st.lists(fault, max_size=4), json_values),
                                           max_size=3), json_values)
stop_rule = st.one_of(
    st.fixed_dictionaries({"ci_fraction": numbers, "max": numbers},
                          optional={"metric": near(list(STOP_METRICS)), "comparison": near(["cmp", "nosuch"]),
                                    "min": numbers}),
    json_values,
)
comparisons = st.one_of(
    st.dictionaries(st.sampled_from(["cmp", "other"]),
                    st.fixed_dictionaries({"factor": near(["cc", "ues", "faults"]), "level": near(["bbr", "2", "p"]),
                                           "baseline": near(["cubic", "1", "none"])},
                                          optional={"metrics": st.lists(near(list(STOP_METRICS)), max_size=3)}),
                    max_size=2),
    json_values,
)


def campaign(lab: str, sections: dict[str, object]) -> str:
    base = {"name": "fuzz", "lab": lab, "workload": {"tool": "probe", "duration_s": 10},
            "factors": {"cc": ["cubic", "bbr"]}}
    return "".join(f"{k}: {json.dumps(v)}\n" for k, v in (base | sections).items())


def planned_or_ours(folder: Path, text: str) -> None:
    from cellab.campaign.load import load_campaign, plan

    path = write_file(folder, "c.yaml", text)
    try:
        plan(load_campaign(path), path)
    except CellabError:
        pass


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz-sections")


@SECTIONS_FUZZ
@given(lab=st.sampled_from(LABS), faults=faults_section,
       picks=st.lists(PLAN_NAMES, max_size=3), ues=st.one_of(st.none(), numbers, st.lists(numbers, max_size=3)))
def test_faults_section(folder, lab, faults, picks, ues):
    sections: dict[str, object] = {"faults": faults}
    if picks:
        sections["factors"] = {"cc": ["cubic"], "faults": picks}
    if ues is not None:
        sections["fixed"] = {"ues": ues}
    planned_or_ours(folder, campaign(lab, sections))


@SECTIONS_FUZZ
@given(lab=st.sampled_from(LABS), until=stop_rule, repeat=st.one_of(numbers, stop_rule), cmp=comparisons,
       tool=near(["probe", "iperf3"]), ues=st.one_of(st.none(), st.lists(numbers, max_size=3)))
def test_stopping_rule_section(folder, lab, until, repeat, cmp, tool, ues):
    sections: dict[str, object] = {"until": until, "repeat": repeat, "comparisons": cmp,
                                   "workload": {"tool": tool, "duration_s": 10}}
    if ues is not None:
        sections["factors"] = {"cc": ["cubic", "bbr"], "ues": ues}
    planned_or_ours(folder, campaign(lab, sections))


@SECTIONS_FUZZ
@given(faults=faults_section, until=stop_rule, picks=st.lists(PLAN_NAMES, max_size=2))
def test_both_sections_together(folder, faults, until, picks):
    sections = {"faults": faults, "until": until, "repeat": 2, "fixed": {"faults": picks[0] if picks else "none"}}
    planned_or_ours(folder, campaign("virtual", sections))
