"""The eNB's own SR receptions: srsenb's PUCCH log lines, the effective SR pattern they imply, the log level
that shows them (bad values named), the agent's sr_occasions.jsonl, and the SR bench's scoring."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from cellab.bus.testing import lab_bus
from cellab.contracts.enb import ConfigureParams, EnbClient, RadioOverrides
from cellab.errors import InputError
from cellab.ran.agent import EnbAgent
from cellab.ran.report import PhyLogTail, SrOccasion, effective_sr, parse_pucch_line
from cellab.ran.sr_bench import score, wilson
from cellab.ran.srsenb_proc import check_sr_log_level, sr_log_level_of, with_sr_log_level

ROOM = Path(__file__).resolve().parents[1]
# srsenb 23.04's format (srslog text formatter; cc_worker.cc "PUCCH: cc=%d; %s", srsran_pucch_rx_info)
LINE = ("2026-11-25T22:48:01.123456 [PHY1   ] [I] [ 4711] PUCCH: cc=0; rnti=0x46, f=1, n_pucch=0, dmrs_corr=0.998, "
        "snr=31.2 dB, corr=0.997, sr=yes, ta=0.0 us")


def test_pucch_line_parsed():
    occ = parse_pucch_line(LINE)
    assert occ is not None and (occ.tti, occ.rnti, occ.sr) == (4711, 0x46, True)
    assert abs(occ.t_s - datetime(2026, 11, 25, 22, 48, 1, 123456, tzinfo=UTC).timestamp()) < 1e-6
    assert parse_pucch_line(LINE.replace("sr=yes", "sr=no")).sr is False
    assert parse_pucch_line(LINE.replace(", sr=yes", "")) is None  # a CQI-only PUCCH: no SR occasion
    assert parse_pucch_line(LINE.replace("cc=0", "cc=1")) is None  # SR rides the primary cell


def test_phy_log_tail_reads_lines_cut_anywhere(tmp_path: Path):
    log = tmp_path / "enb.log"
    tail = PhyLogTail(log)
    assert tail.read_new() == []  # not written yet
    text = (LINE + "\n" + "2026-11-25T22:48:01.2 [MAC   ] [I] [ 4712] other\n" + LINE.replace("4711", "4721") + "\n")
    cut = len(LINE) // 2
    log.write_text(text[:cut])
    assert tail.read_new() == []
    with open(log, "a") as out:
        out.write(text[cut:])
    assert [o.tti for o in tail.read_new()] == [4711, 4721]


def _occasions(period: int, sr_at: list[int], n: int, tti0: int = 10000) -> list[SrOccasion]:
    # n occasions every `period` TTIs from tti0 (wrapping at 10240), 1 ms of wall clock per TTI
    return [SrOccasion(t_s=100 + k * period / 1000, tti=(tti0 + k * period) % 10240, rnti=70, sr=k in sr_at)
            for k in range(n)]


def test_effective_period_every_occasion_used():
    eff = effective_sr(_occasions(10, [0, 1, 5, 8, 9, 13, 20, 21, 30, 33], 40), 10)
    assert eff["period_ms"] == 10 and eff["receptions"] == 10 and eff["opportunities"] == 40
    assert eff["spacing_ms"] == {"10": 3, "30": 2, "40": 2}  # 0-1, 8-9, 20-21; 5-8, 30-33; 1-5, 9-13
    assert eff["tti_per_s"] == pytest.approx(1000, rel=0.01)  # across the TTI wrap
    assert eff["sr_ttis"][0] == 10000 and eff["sr_ttis"][-1] == 10000 + 330


def test_effective_period_every_other_occasion_and_unused_named():
    # the UE sends SR only at even occasions: 2P effective, the odd occasions between repeats left unused
    eff = effective_sr(_occasions(5, [0, 2, 4, 10, 12, 20, 22, 24, 30], 40), 5)
    assert eff["period_ms"] == 10 and eff["configured_ms"] == 5
    assert eff["unused"] == 5  # occasions 1, 3, 11, 21, 23 (repeats at most 4 occasions apart)
    assert eff["spacing_ms"] == {"10": 5}  # 0-2, 2-4, 10-12, 20-22, 22-24


def test_effective_period_needs_receptions():
    assert effective_sr(_occasions(10, [0, 2], 10), 10)["period_ms"] is None
    # 4 receptions on one phase of 2P are chance (1 in 8): not enough to name 2P
    assert effective_sr(_occasions(10, [0, 2, 4, 6], 10), 10)["period_ms"] == 10


CONF = "[enb]\nn_prb = 25\n\n[log]\nall_level = warning\nfilename = enb.log\n\n[scheduler]\npolicy = time_pf\n"


def test_sr_log_level_set_and_a_hiding_level_named():
    conf = with_sr_log_level(CONF)
    assert "phy_level = info" in conf and sr_log_level_of(conf) == "info"
    assert conf.index("phy_level") < conf.index("[scheduler]")
    with pytest.raises(InputError, match=r"\[log\] phy_level: 'warning' hides the eNB's SR receptions.*allowed: info, debug"):
        sr_log_level_of(CONF)
    with pytest.raises(InputError, match=r"sr_log_level: 'error' hides"):
        with_sr_log_level(CONF, "error")
    assert sr_log_level_of(CONF.replace("warning", "debug")) == "debug"


def test_agent_option_refuses_a_hiding_level():
    # what EnbAgent(sr_log_level=...) checks at its start, naming the agent and the option
    with pytest.raises(InputError, match="enb agent enb1: sr_log_level: 'warning' hides"):
        check_sr_log_level("warning", "enb agent enb1")
    assert check_sr_log_level("debug") == "debug"


def test_agent_writes_sr_occasions_from_the_phy_log(tmp_path: Path, fake_srsenb: Path):
    with lab_bus(tmp_path, {"enb1": EnbAgent},
                 agent_kwargs={"enb1": {"srsenb_bin": fake_srsenb, "report_poll_s": 0.1}}) as (ctl, agents):
        enb = EnbClient(ctl, "enb1")
        enb.configure(ConfigureParams(profile_yaml=(ROOM / "examples/zmq-25prb.yaml").read_text(),
                                      profile_name="zmq-25prb.yaml", overrides=RadioOverrides(sr_period_ms=20)))
        conf = (agents["enb1"].artifact_dir / "config" / "enb.conf").read_text()
        assert "phy_level = info" in conf
        path = agents["enb1"].artifact_dir / "sr_occasions.jsonl"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and (not path.exists() or len(path.read_text().splitlines()) < 20):
            time.sleep(0.1)
        rows = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(rows) >= 20 and {r["rnti"] for r in rows} == {70}
    eff = effective_sr([SrOccasion(r["t_s"], r["tti"], r["rnti"], r["sr"]) for r in rows], 20)
    assert eff["period_ms"] == 20  # SRs every third occasion, also across the fake's 200 ms loops
    assert all(int(k) % 20 == 0 for k in eff["spacing_ms"])


def test_bench_scores_no_answer_apart_from_wrong():
    rows = [{"sr_true_ms": 10, "sr_estimate_ms": 10.0, "sr_effective_ms": 10, "sr_probes_used": 30},
            {"sr_true_ms": 10, "sr_estimate_ms": None, "sr_ambiguous": True, "sr_effective_ms": 10, "sr_probes_used": 60},
            {"sr_true_ms": 5, "sr_estimate_ms": 10.0, "sr_effective_ms": 10, "sr_probes_used": 35}]
    s = score(rows)
    assert (s["right"], s["confident_wrong"], s["no_answer"]) == (1, 1, 1)
    assert s["truth_in_candidates"] == 0  # the ambiguous row lists no candidates
    assert (s["right_effective"], s["confident_wrong_effective"]) == (2, 0)
    assert s["confusion"][10]["amb."] == 1 and s["confusion"][5]["10"] == 1
    assert s["probes_max"] == 60
    lo, hi = wilson(1, 3)
    assert 0.05 < lo < 0.07 and 0.78 < hi < 0.80
    assert wilson(0, 0) == (0.0, 1.0)
