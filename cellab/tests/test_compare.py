"""`cellab compare DIR_A DIR_B ...`: campaigns side by side, what differs in their conditions and software first,
then each shared cell's ratio with its interval and test; bad input (a folder that is not a campaign, campaigns
with no shared factor, an output that exists or is a link) is a clear error and nothing is overwritten."""

from __future__ import annotations

import json
import os
import textwrap

import pytest
import yaml

from cellab.errors import CellabError
from cellab.records import PlannedRun, write_json
from cellab.report.compare import compare
from cellab.report.compare_page import summary_line, write_compare
from cellab.results.store import ResultStore
from cellab.testkit.helpers import only_folder, run_cellab


def _folder(tmp_path, name, campaign: dict, values, software=None):
    """A finished campaign folder: every combination of its factors' levels x 3 repeats, metrics from
    values(factors, repeat), each run's manifest with `software`."""
    levels = {k: list(v) for k, v in campaign.get("factors", {}).items()}
    combos = [{}]
    for factor, options in levels.items():
        combos = [{**c, factor: o} for c in combos for o in options]
    runs = [PlannedRun(index=i, run_id=f"{name}{i}", repeat=r, factors=f, params={})
            for i, (f, r) in enumerate((f, r) for f in combos for r in range(3))]
    store = ResultStore.create(tmp_path / name, campaign["name"], yaml.safe_dump(campaign), runs)
    for run in runs:
        store.start(run)
        write_json(store.run_dir(run.run_id) / "manifest.json", {"run_id": run.run_id, "software": software or {},
                                                                 "provenance": {"started_ns": run.index}})
        store.finish(run, "ok", metrics=values(run.factors, run.repeat))
    return store.root


def _same(factors, repeat):
    return {"throughput_bps": 10e6 * (1 + 0.01 * (repeat - 1)), "rtt_p95_ms": 40.0 * (1 + 0.02 * (repeat - 1))}


SHOOTOUT = {"name": "shoot", "lab": "virtual", "factors": {"scheme": {"cubic": {"cc": "cubic"}, "reno": {"cc": "reno"}}},
            "fixed": {"n_prb": 15}}


def test_the_same_campaign_twice_gives_ratios_whose_intervals_include_1(tmp_path):
    a = _folder(tmp_path, "a", SHOOTOUT, _same, {"iperf3": "3.12"})
    b = _folder(tmp_path, "b", SHOOTOUT, _same, {"iperf3": "3.12"})
    result = compare([a, b])
    assert result.shared == ["scheme"] and result.differences == []  # the per-run provenance key is left out
    assert {(c.cell["scheme"], c.metric) for c in result.cells} == {
        (s, m) for s in ("cubic", "reno") for m in ("throughput_bps", "rtt_p95_ms")}
    for cell in result.cells:
        assert cell.ratio.ratio == pytest.approx(1.0) and cell.ratio.includes(1.0), cell
        assert cell.ratio.p_value == pytest.approx(1.0)
    assert summary_line(result) == "4 of 4 ratios' 95 % intervals include 1; the smallest Mann–Whitney p is 1"


def test_what_differs_is_listed_first_conditions_then_software(tmp_path):
    wired = {**SHOOTOUT, "lab": "wired", "fixed": {"rate_mbit": 10}, "factors": {
        **SHOOTOUT["factors"], "buffer": [1, 2]}}
    a = _folder(tmp_path, "a", SHOOTOUT, _same, {"iperf3": "3.12", "kernel": "6.1"})
    b = _folder(tmp_path, "b", wired, lambda f, r: {k: v * 1.5 for k, v in _same(f, r).items()},
                {"iperf3": "3.16", "kernel": "6.1"})
    result = compare([a, b])
    differs = {(d.kind, d.key): d.values for d in result.differences}
    assert differs[("condition", "lab")] == ["virtual", "wired"]
    assert differs[("condition", "fixed.n_prb")] == ["15", "—"] and differs[("condition", "fixed.rate_mbit")] == [
        "—", "10"]
    assert differs[("factor", "buffer")] == ["— (not a factor)", "1, 2"]
    assert differs[("software", "software.iperf3")] == ["3.12", "3.16"]
    assert ("software", "software.kernel") not in differs
    assert not [k for k in differs if k[1].startswith("provenance.started_ns")]  # per run: left out
    kinds = [d.kind for d in result.differences]
    assert kinds == sorted(kinds, key=["condition", "factor", "software"].index)  # conditions first
    assert result.pooled == {result.campaigns[1].label: ["buffer"]}
    for cell in result.cells:  # b is 1.5 times a everywhere
        assert cell.ratio.ratio == pytest.approx(1.5) and not cell.ratio.includes(1.0)
    assert summary_line(result) == "0 of 4 ratios' 95 % intervals include 1; the smallest Mann–Whitney p is 0.0262"  # 6 vs 3 runs, tied
    page = write_compare(result, tmp_path / "cmp")
    text = page.read_text()
    assert text.index("What differs") < text.index("Shared cells") and "3.16" in text and "×1.50" in text
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert data["shared_factors"] == ["scheme"] and len(data["cells"]) == 4 and data["differences"][0]["key"] == "lab"


def test_campaigns_with_no_shared_factor_are_refused(tmp_path):
    a = _folder(tmp_path, "a", SHOOTOUT, _same)
    b = _folder(tmp_path, "b", {"name": "sweep", "factors": {"n_prb": [15, 25]}}, _same)
    with pytest.raises(CellabError) as caught:
        compare([a, b])
    text = str(caught.value)
    assert "share no factor" in text and f"shoot ({a.name}): scheme" in text and f"sweep ({b.name}): n_prb" in text


def test_shared_factors_without_a_shared_cell_are_refused(tmp_path):
    a = _folder(tmp_path, "a", SHOOTOUT, _same)
    b = _folder(tmp_path, "b", {"name": "other", "factors": {"scheme": {"bbr": {"cc": "bbr"}}}}, _same)
    with pytest.raises(CellabError, match="no cell both ran"):
        compare([a, b])


def test_bad_folders_are_refused_naming_them(tmp_path):
    a = _folder(tmp_path, "a", SHOOTOUT, _same)
    (tmp_path / "empty").mkdir()
    for bad, says in ((tmp_path / "empty", "not a campaign result folder (campaign.yaml missing)"),
                      (tmp_path / "nowhere", "not a campaign result folder (no such folder)")):
        with pytest.raises(CellabError) as caught:
            compare([a, bad])
        assert str(bad) in str(caught.value) and says in str(caught.value)
    with pytest.raises(CellabError, match="two campaign folders or more"):
        compare([a])
    done = run_cellab("compare", str(a), str(tmp_path / "empty"), "--out", str(tmp_path / "cmp"))
    assert done.returncode == 2 and "not a campaign result folder" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "cmp").exists()


def test_an_existing_output_or_a_link_is_never_overwritten(tmp_path):
    a = _folder(tmp_path, "a", SHOOTOUT, _same)
    b = _folder(tmp_path, "b", SHOOTOUT, _same)
    result = compare([a, b])
    out = tmp_path / "cmp"
    out.mkdir()
    (out / "compare.html").write_text("mine")
    with pytest.raises(CellabError, match="compare.html already there: nothing was overwritten"):
        write_compare(result, out)
    assert (out / "compare.html").read_text() == "mine" and not (out / "compare.json").exists()
    linked = tmp_path / "linked"
    linked.mkdir()
    target = tmp_path / "elsewhere.json"
    target.write_text("keep")
    os.symlink(target, linked / "compare.json")
    with pytest.raises(CellabError, match="compare.json already there"):
        write_compare(result, linked)
    assert target.read_text() == "keep" and not (linked / "compare.html").exists()
    done = run_cellab("compare", str(a), str(b), "--out", str(out))  # refused before anything is printed
    assert done.returncode == 2 and "compare.html already there" in done.stderr and "shared cells" not in done.stdout
    assert (out / "compare.html").read_text() == "mine"


# --- on the labs ----------------------------------------------------------------------------------------------
LAB_CAMPAIGN = """
    name: mini-shootout
    lab: {lab}
    repeat: {repeat}
    factors:
      scheme: {{cubic: {{cc: cubic}}, reno: {{cc: reno}}}}
    fixed: {fixed}
    workload: {{tool: iperf3, duration_s: 2, ping_interval_ms: 100}}
    timeouts: {{run_s: 60, request_s: 15}}
    retry: {{max_attempts: 2, backoff_s: 0.2}}
"""


def _run(tmp_path, name, lab, repeat, fixed, prefix):
    path = tmp_path / f"{name}.yaml"
    path.write_text(textwrap.dedent(LAB_CAMPAIGN.format(lab=lab, repeat=repeat, fixed=fixed)))
    done = run_cellab("run", str(path), "--out", str(tmp_path / name), "--prefix", prefix, "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    return only_folder(tmp_path / name)


def test_the_command_prints_what_differs_then_the_cells_and_writes_its_page(tmp_path):
    a = _folder(tmp_path, "a", SHOOTOUT, _same, {"iperf3": "3.12"})
    b = _folder(tmp_path, "b", {**SHOOTOUT, "lab": "wired", "fixed": {"rate_mbit": 10}}, _same, {"iperf3": "3.16"})
    done = run_cellab("compare", str(a), str(b), "--out", str(tmp_path / "cmp"))
    assert done.returncode == 0, done.stdout + done.stderr
    said = " ".join(done.stdout.split())
    assert "differences" in said and "lab: virtual | wired" in said and said.index("lab:") < said.index("cubic")
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert len(data["cells"]) == 4 and (tmp_path / "cmp" / "compare.html").is_file()


# two real campaigns of the virtual lab and one of the wired lab (about 40 s of lab time): an experiment on the lab's
# repeatability, so in `make bench BENCH=extended`; the comparison itself is held above on stored folders
@pytest.mark.extended
def test_compare_two_runs_of_a_shootout_and_wired_against_virtual(require_root, netns_prefix, tmp_path):
    first = _run(tmp_path, "first", "virtual", 2, "{n_prb: 15, core_delay_ms: 10}", netns_prefix)
    again = _run(tmp_path, "again", "virtual", 2, "{n_prb: 15, core_delay_ms: 10}", netns_prefix)
    wired = _run(tmp_path, "wired", "wired", 1, "{rate_mbit: 10}", netns_prefix)
    done = run_cellab("compare", str(first), str(again), "--out", str(tmp_path / "cmp"))
    assert done.returncode == 0, done.stdout + done.stderr
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert not [d for d in data["differences"] if d["kind"] == "condition"], data["differences"]
    cells = {(c["cell"]["scheme"], c["metric"]): c for c in data["cells"]}
    assert {k[0] for k in cells} == {"cubic", "reno"} and ("cubic", "throughput_bps") in cells
    shown = {" ".join(k): f"×{c['ratio']:.3f} [{c['low']:.3f}, {c['high']:.3f}] p {c['p_value']:.2f}"
             for k, c in cells.items()}
    print("virtual twice, campaign ÷ first:", json.dumps(shown, indent=1))  # the measurement, kept in the log
    for cell in cells.values():
        assert cell["n_level"] == cell["n_base"] == 2 and cell["low"] <= cell["ratio"] <= cell["high"], shown
    # the cell's capacity repeats itself: Cubic, which fills it within the 2 s, gets it within 15 % in both campaigns.
    # Reno is not asserted: its 2 s throughput is its slow start's exit, which lands in one of two modes like Cubic's
    # RTT below (a clean-clone CI run measured reno x0.842 [0.840, 0.845] with both its runs a side in one mode each)
    assert 0.85 <= cells[("cubic", "throughput_bps")]["ratio"] <= 1.15, shown
    # Not asserted: that every interval includes 1. Measured (9 campaigns of this one, 2 runs a cell): cubic's p95
    # RTT sits in one of two modes, 119-126 ms or 159-166 ms (sender sRTT 120-123 or 154-161 ms, no retransmission,
    # the cell's downlink queue peaking at 84 or 138 kB in the first second): Cubic's slow start ends one round
    # apart, a step of +40 ms at 0.5 s that stays. Not a state of the lab session: both modes come in one session,
    # and on a fresh session's first run (no TCP metrics cached; the lab now keeps none, test_no_tcp_state.py). The
    # cell's TTI log shows what decides it (16 runs): whether the UE sends an SR at the SR occasion that falls in
    # the first flight (4-8 TTIs after its first data). If its first ACK is ready by then, the ACKs go up at 13-16 ms,
    # the second flight comes at 37-40 ms, the downlink queue never drains (24-30 kB at 50-100 ms) and slow start
    # ends at ~30 kB; if not, the second flight comes at 45-48 ms, the queue drains to 6-9 kB, the delay signal
    # is missed and slow start runs a round longer (85-88 kB at 150 ms, +40 ms kept). The SR grid against the
    # flow's start, to within a TTI and the UE host's jitter: each run's own timing, as on a real cell. Two runs a
    # side in different modes give a ratio of 1.3 whose 2-run bootstrap interval excludes 1.
    done = run_cellab("compare", str(first), str(wired), "--out", str(tmp_path / "cmp2"))
    assert done.returncode == 0, done.stdout + done.stderr
    differs = {d["key"]: d["values"] for d in json.loads((tmp_path / "cmp2" / "compare.json").read_text())[
        "differences"]}
    assert differs["lab"] == ["virtual", "wired"] and differs["fixed.n_prb"] == ["15", "—"], differs
    assert differs["fixed.rate_mbit"] == ["—", "10"] and differs["repeat"] == ["2", "1"]
    assert "differences" in done.stdout and "lab: virtual | wired" in " ".join(done.stdout.split())
