"""The fidelity bench's virtual side on the real side's clocks (cellab.fidelity.clocks) and `cellab fidelity`'s
options and exit status: no lab runs here (the cell on a recorded clock: emulator/tests/test_stack_clock.py)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
import yaml
from typer.testing import CliRunner

from cellab.campaign.load import load_campaign, plan
from cellab.errors import CellabError, InputError, InputErrors
from cellab.fidelity import cases as fidelity
from cellab.fidelity.cli import check_options, exit_status
from cellab.fidelity.clocks import LEAD_S, case_of, cut_clock, on_real_clocks, real_clocks
from cellab.fidelity.judge import Row
from cellab.labs.clock import StackClock
from cellab.results.store import ResultStore

HEADER = {"format": "cellab-stack-clock", "version": 1, "direction": "dl", "sample_rate_hz": 5760000,
          "samples_per_tti": 5760, "clock": "CLOCK_REALTIME", "run_id": "r", "first_tti": 100}
GRID = fidelity.Grid(n_prb=(25,), sr_period_ms=(20,), download_ccs=("cubic",), download_n_prb=(25,), snr_db=(),
                     upload_n_prb=(), two_ues=False, recovery_n_prb=(), repeats=2)
CAPABILITIES = ({"n_prb", "sr_period_ms", "rlc_queue", "core_delay_ms", "clock_file"}, 1, 30.0)


def write_clock(path: Path, t0_s: float, n: int, step_ms: float = 2.0, first_tti: int | None = None) -> Path:
    times = (t0_s * 1e9 + np.arange(n) * step_ms * 1e6).astype("<i8")
    header = HEADER if first_tti is None else HEADER | {"first_tti": first_tti}
    path.write_bytes(json.dumps(header).encode() + b"\n" + times.tobytes())
    return path


def test_a_clock_is_cut_at_the_last_tti_begun_by_then(tmp_path):
    src = write_clock(tmp_path / "full.bin", 1000.0, 10)  # records at 1000.000, .002, ... .018 s
    cut = StackClock.from_file(cut_clock(src, 1000.0075, tmp_path / "cut.bin"))
    assert (cut.first_tti, cut.ttis) == (103, 7)  # record 3 (1000.006 s) is the last at or before
    assert cut.wall_at(cut.first_tti + 1) == pytest.approx(1000.006)
    assert StackClock.from_file(cut_clock(src, 990.0, tmp_path / "all.bin")).ttis == 10  # before its start
    with pytest.raises(CellabError, match="ends before the workload"):
        cut_clock(src, 1001.0, tmp_path / "none.bin")
    (tmp_path / "bad.bin").write_bytes(b"{}\n")
    with pytest.raises(InputError, match="bad.bin"):
        cut_clock(tmp_path / "bad.bin", 1000.0, tmp_path / "x.bin")


def _real_folder(tmp_path: Path, statuses: list[str], clocks: list[bool]) -> fidelity.CampaignResult:
    """A stored srsran-zmq campaign of the grid's cases: run i has the given status, a clock file when clocks[i]."""
    campaign = fidelity.build_plan(fidelity.REAL_LAB, GRID, CAPABILITIES).campaigns["load"]
    runs = [r for r in plan(_campaign(tmp_path, campaign))]
    store = ResultStore.create(tmp_path / "out", campaign["name"], yaml.safe_dump(campaign), runs)
    for run, status, has_clock in zip(runs, statuses, clocks, strict=True):
        run_dir = store.start(run)
        t0 = time.time() + 60 * run.index
        (run_dir / "manifest.json").write_text(json.dumps({"workload_started_at": t0, "lab_timing": {
            "stack_clock": {"speed": 0.5}}}))
        if has_clock:
            write_clock(run_dir / "stack-clock-dl.bin", t0 - 3.0, 6000)  # configure 3 s before the workload
        store.finish(run, status, metrics={})
    return fidelity.CampaignResult(fidelity.REAL_LAB, "load", store.root)


def _campaign(tmp_path: Path, campaign: dict):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / f"{campaign['name']}.yaml"
    path.write_text(yaml.safe_dump(campaign, sort_keys=False))
    return load_campaign(path)


def test_each_virtual_repeat_runs_on_its_real_repeats_clock_cut_before_the_workload(tmp_path):
    real = _real_folder(tmp_path, ["ok", "ok"], [True, True])
    clocks = real_clocks([real], tmp_path / "clocks")
    assert [(c.repeat, c.speed, c.why) for c in clocks["dl-cubic-25prb"]] == [(0, 0.5, None), (1, 0.5, None)]
    for c in clocks["dl-cubic-25prb"]:
        clock = StackClock.from_file(c.path)
        manifest = json.loads((ResultStore.open(real.folder).run_dir(
            ResultStore.open(real.folder).rows()[c.repeat]["run_id"]) / "manifest.json").read_text())
        assert clock.wall_at(clock.first_tti + 1) == pytest.approx(manifest["workload_started_at"] - LEAD_S,
                                                                   abs=0.002)
    virtual = fidelity.build_plan(fidelity.VIRTUAL_LAB, GRID, CAPABILITIES)
    notes = on_real_clocks(virtual, clocks, GRID.repeats)
    assert not [n for n in notes if n.startswith("dl-cubic-25prb")]
    load = virtual.campaigns["load"]
    assert load["repeat"] == 1 and list(load["factors"]["case"]) == ["dl-cubic-25prb_r0", "dl-cubic-25prb_r1"]
    assert [level["clock_file"] for level in load["factors"]["case"].values()] == [
        str(c.path) for c in clocks["dl-cubic-25prb"]]
    runs = plan(_campaign(tmp_path, load))  # the campaign validates, the clock files read whole
    assert [case_of(r.factors["case"]) for r in runs] == ["dl-cubic-25prb"] * 2
    assert {r.params["clock_file"] for r in runs} == {str(c.path) for c in clocks["dl-cubic-25prb"]}
    idle = virtual.campaigns["idle"]["factors"]["case"]  # no real idle campaign here: at real time, said so
    assert all("clock_file" not in level for level in idle.values())


def test_a_repeat_without_a_real_clock_takes_another_and_a_case_without_any_runs_at_real_time(tmp_path):
    real = _real_folder(tmp_path, ["failed", "ok"], [False, True])
    clocks = real_clocks([real], tmp_path / "clocks")
    assert clocks["dl-cubic-25prb"][0].why == "real run failed"
    virtual = fidelity.build_plan(fidelity.VIRTUAL_LAB, GRID, CAPABILITIES)
    notes = on_real_clocks(virtual, clocks, GRID.repeats)
    levels = virtual.campaigns["load"]["factors"]["case"]
    assert levels["dl-cubic-25prb_r0"]["clock_file"] == levels["dl-cubic-25prb_r1"]["clock_file"]
    assert "dl-cubic-25prb: virtual repeat 0 on real repeat 1's clock" in notes
    assert any(n.startswith("idle-25prb-sr20: the virtual cell ran at real time") for n in notes)

    no_file = _real_folder(tmp_path / "b", ["ok", "ok"], [False, False])
    for clock in real_clocks([no_file], tmp_path / "clocks-b")["dl-cubic-25prb"]:
        assert clock.path is None and "stack-clock-dl.bin" in clock.why and "cannot read" in clock.why


def test_read_results_counts_each_virtual_level_as_its_case():
    assert case_of("dl-cubic-25prb_r3") == "dl-cubic-25prb" and case_of("idle-6prb-sr5") == "idle-6prb-sr5"


@pytest.mark.parametrize("options, field", [((7, 20, 5, "cubic"), "--n-prb"), ((25, 30, 5, "cubic"), "--sr-period-ms"),
                                            ((25, 20, 0, "cubic"), "--repeats"), ((25, 20, 5, "fast"), "--case")])
def test_bad_options_name_the_option_and_the_allowed_values(options, field):
    with pytest.raises(InputError, match=field) as exc:
        check_options(*options)
    assert "allowed" in str(exc.value)


def test_options_select_the_case_and_its_grid():
    from cellab.fidelity.cli import case_grid

    assert check_options(15, 40, 5, "idle") == "idle-15prb-sr40"
    assert check_options(15, 40, 5, "loaded") == "dl-cubic-15prb"
    grid = case_grid(15, 40, 3)
    load = fidelity.build_plan(fidelity.VIRTUAL_LAB, grid, CAPABILITIES).campaigns["load"]
    assert load["fixed"]["sr_period_ms"] == 40 and load["repeat"] == 3
    assert "dl-cubic-15prb" in load["factors"]["case"] and "idle-15prb-sr40" in fidelity.case_names(grid)


def _row(verdict: str) -> Row:
    return Row("dl-cubic-25prb", "throughput (Mbit/s)", 10.0, 10.0, 1.0, "±15 %", verdict)


def test_exit_status_fails_a_failed_case():
    assert exit_status([_row("PASS"), _row("known deviation: x")]) == 0
    assert exit_status([_row("PASS"), _row("FAIL")]) == 1
    assert exit_status([_row("PASS"), _row("undecided: 0.8..1.1")]) == 3
    assert exit_status([_row("not measured: no run on srsran-zmq")]) == 3
    assert exit_status([]) == 3


def test_the_command_refuses_bad_options_without_a_traceback(monkeypatch):
    from cellab import cli

    result = CliRunner().invoke(cli.app, ["fidelity", "--n-prb", "7", "--sr-period-ms", "20"])
    assert result.exit_code != 0 and "Traceback" not in (result.output or "")
    assert isinstance(result.exception, (InputError, SystemExit))


def test_the_cells_ttis_are_put_on_its_own_clock_when_it_ran_on_a_recorded_one(tmp_path):
    from cellab.results.cell_time import cell_clock

    mark = {"tti": 0.0, "t_s": 1000.0}
    own = write_clock(tmp_path / "stack-clock-dl.bin", 1000.0, 100, first_tti=0)  # the cell ran a TTI every 2 ms
    assert cell_clock(mark, own)([0, 10, 99]) == pytest.approx([1000.0, 1000.02, 1000.198])
    # a later segment of a capped clock (--log-max-bytes): its first record is the cell's TTI 100
    segment = write_clock(tmp_path / "segment.bin", 1000.0, 100, first_tti=100)
    assert cell_clock(mark, segment)([100, 110, 199]) == pytest.approx([1000.0, 1000.02, 1000.198])
    assert cell_clock(mark, None)([0, 10]) == pytest.approx([1000.0, 1000.01])  # no clock: a TTI per ms
    assert cell_clock(mark, tmp_path / "none.bin")(10) == pytest.approx(1000.01)
    (tmp_path / "bad.bin").write_bytes(b"x")
    with pytest.raises(InputError, match="bad.bin"):
        cell_clock(mark, tmp_path / "bad.bin")


def test_a_campaigns_clock_file_is_relative_to_the_campaign_and_checked_whole(tmp_path):
    write_clock(tmp_path / "real.bin", 1000.0, 50)
    campaign = {"name": "c", "lab": "virtual", "fixed": {"clock_file": "real.bin"},
                "workload": {"tool": "iperf3", "duration_s": 1}}
    runs = plan(_campaign(tmp_path, campaign))
    assert runs[0].params["clock_file"] == str(tmp_path / "real.bin")
    (tmp_path / "real.bin").write_bytes((tmp_path / "real.bin").read_bytes()[:-3])  # a record cut short
    with pytest.raises(InputErrors, match="fixed.clock_file: .*real.bin: record 49: truncated"):
        plan(_campaign(tmp_path, campaign))


def test_a_cell_telemetry_sample_is_placed_by_the_cells_own_clock():
    from cellab.run.telemetry import sample_time_s

    mark = {"tti": 1000.0, "t_s": 5000.0}
    assert sample_time_s({"tti": 2000, "wall_ns": 5002_000_000_000}, 2000.0, mark) == pytest.approx(5002.0)
    assert sample_time_s({"tti": 2000}, 2000.0, mark) == pytest.approx(5001.0)  # an older cell: a TTI per ms
