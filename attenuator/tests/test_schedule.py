"""Schedule files: parsing, expansion of YAML segments, safety checks that name the row."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from cellab.attenuator.schedule import SafetyLimits, check, load, parse_csv, parse_yaml

from cellab.errors import InputError, InputErrors

LIMITS = SafetyLimits(channels=[1, 2], min_db=10, max_db=90, step_db=0.25, max_slew_db_per_s=20)


def test_csv_parses_and_sorts_by_time() -> None:
    s = parse_csv("t_s,channel,db\n0,1,30\n0.5,2,40.1\n1.0,1,35\n", "a.csv")
    assert [(p.t_s, p.channel, p.db) for p in s.points] == [(0, 1, 30), (0.5, 2, 40.1), (1.0, 1, 35)]
    assert s.duration_s == 1.0
    checked = check(s, LIMITS)
    assert [p.db for p in checked.points] == [30, 40.0, 35]  # quantized to 0.25


@pytest.mark.parametrize(
    "text, field, message",
    [
        ("t,ch,db\n", "header", "t,ch,db"),
        ("t_s,channel,db\n0,1,30\nx,1,30\n", "row 3.t_s", "not a number"),
        ("t_s,channel,db\n0,1,30\n1,one,30\n", "row 3.channel", "not an integer"),
        ("t_s,channel,db\n0,1,30\n1,1,nan\n", "row 3.db", "finite"),
        ("t_s,channel,db\n0,1,30\n2,1,30\n1,1,30\n", "row 4.t_s", "non-decreasing"),
        ("t_s,channel,db\n0,1\n", "row 2", "3 columns"),
        ("t_s,channel,db\n", "rows", "no points"),
    ],
)
def test_csv_errors_name_file_row_and_field(text: str, field: str, message: str) -> None:
    with pytest.raises(InputError) as err:
        parse_csv(text, "drive.csv")
    assert err.value.source == "drive.csv"
    assert err.value.field == field
    assert message in str(err.value)


def test_out_of_limits_row_is_rejected_naming_the_row() -> None:
    s = parse_csv("t_s,channel,db\n0,1,30\n1,1,35\n2,1,5\n", "s.csv")
    with pytest.raises(InputError) as err:
        check(s, LIMITS)
    assert err.value.field == "row 4.db"
    assert "outside the safety limits [10.0, 90.0]" in str(err.value)


def test_unknown_channel_and_slew_are_rejected() -> None:
    with pytest.raises(InputError, match=r"row 2.channel: no channel 3"):
        check(parse_csv("t_s,channel,db\n0,3,30\n", "s.csv"), LIMITS)
    with pytest.raises(InputError, match=r"row 3.db: 30.0 → 60.0 dB in 1.000 s is 30.00 dB/s"):
        check(parse_csv("t_s,channel,db\n0,1,30\n1,1,60\n", "s.csv"), LIMITS)
    # slew is per channel: the other channel's jump does not count
    check(parse_csv("t_s,channel,db\n0,1,30\n0,2,60\n1,1,45\n", "s.csv"), LIMITS)


def test_yaml_segments_expand_exactly() -> None:
    text = """
channels: [1]
update_interval_s: 0.5
segments:
  - {kind: hold, db: 20, duration_s: 1}
  - {kind: ramp, from_db: 20, to_db: 30, duration_s: 2}
  - {kind: steps, values_db: [40, 50], dwell_s: 1}
  - kind: repeat
    times: 2
    segments:
      - {kind: hold, db: 60, duration_s: 0.5}
      - {kind: hold, db: 70, duration_s: 0.5}
  - {kind: sine, mean_db: 50, amplitude_db: 10, period_s: 2, duration_s: 2}
"""
    s = parse_yaml(text, "m.yaml")
    got = [(p.t_s, round(p.db, 6)) for p in s.points]
    sine = [(7.0 + 0.5 * k, round(50 + 10 * math.sin(2 * math.pi * 0.5 * k / 2), 6)) for k in range(4)]
    assert got == [
        (0.0, 20.0),
        (1.0, 20.0), (1.5, 22.5), (2.0, 25.0), (2.5, 27.5),
        (3.0, 40.0),  # the ramp's end (30 at t=3) is replaced by the next segment's start
        (4.0, 50.0),
        (5.0, 60.0), (5.5, 70.0), (6.0, 60.0), (6.5, 70.0),
    ] + sine
    assert s.duration_s == 9.0
    assert s.points[7].source == "segment 4.repeat1.segment 1 (hold)"
    assert s.points[10].source == "segment 4.repeat2.segment 2 (hold)"


def test_yaml_errors_name_segment_and_field() -> None:
    bad = "segments:\n  - {kind: hold, db: 20}\n  - {kind: ramp, from_db: 1, to_db: 2, duration_s: -1}\n"
    with pytest.raises(InputErrors) as err:
        parse_yaml(bad, "x.yaml")
    fields = [e.field for e in err.value.errors]
    assert "segments[0].hold.duration_s" in fields
    assert "segments[1].ramp.duration_s" in fields
    with pytest.raises(InputErrors) as err2:
        parse_yaml("segments:\n  - {kind: wobble, db: 1}\n", "x.yaml")
    assert "hold" in str(err2.value) and "sine" in str(err2.value)  # the allowed kinds are listed


def test_yaml_clip_is_reported_not_silent() -> None:
    s = parse_yaml("clip: true\nsegments:\n  - {kind: steps, values_db: [5, 50, 95, 50], dwell_s: 10}\n", "c.yaml")
    checked = check(s, LIMITS.model_copy(update={"max_slew_db_per_s": None}))
    assert [p.db for p in checked.points] == [10, 50, 90, 50]
    assert checked.clip_report.clipped == 2 and checked.clip_report.total == 4
    assert checked.clip_report.first_source == "segment 1 (steps)"
    with pytest.raises(InputError, match=r"segment 1 \(steps\).db"):
        check(s.model_copy(update={"clip": False}), LIMITS)


def test_mechanical_relays_refuse_fast_schedules() -> None:
    slow = LIMITS.model_copy(update={"min_interval_s": 1.0, "max_slew_db_per_s": None})
    with pytest.raises(InputError, match="mechanical relays"):
        check(parse_csv("t_s,channel,db\n0,1,30\n0.1,1,40\n", "k.csv"), slow)
    check(parse_csv("t_s,channel,db\n0,1,30\n1,1,40\n", "k.csv"), slow)


def test_load_by_suffix(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("t_s,channel,db\n0,1,20\n")
    (tmp_path / "b.yaml").write_text("segments: [{kind: hold, db: 20, duration_s: 3}]\n")
    (tmp_path / "c.txt").write_text("")
    assert load(tmp_path / "a.csv").points[0].db == 20
    assert load(tmp_path / "b.yaml").duration_s == 3
    with pytest.raises(InputError, match="allowed: .csv, .yaml, .yml"):
        load(tmp_path / "c.txt")
    with pytest.raises(InputError, match="cannot read"):
        load(tmp_path / "missing.csv")


@pytest.mark.parametrize("cell, says", [("nan", "is not a finite number"), ("inf", "is not a finite number"),
                                        ("\u221280", "is not a number"), ("strong", "is not a number")])
def test_a_drive_log_value_that_is_not_a_number_is_refused_naming_the_row(tmp_path, cell, says):
    from cellab.attenuator.mobility import load_drive_log
    from cellab.errors import InputError

    path = tmp_path / "drive.csv"
    path.write_text(f"t_s,rsrp_dbm\n0,-80\n1,{cell}\n2,-90\n")
    with pytest.raises(InputError) as caught:
        load_drive_log(path)
    assert "row 3.rsrp_dbm" in str(caught.value) and says in str(caught.value)


def test_a_drive_log_with_two_samples_at_one_instant_or_an_absurd_span_is_refused(tmp_path):
    from cellab.attenuator.mobility import load_drive_log
    from cellab.errors import InputError

    path = tmp_path / "drive.csv"
    path.write_text("t_s,rsrp_dbm\n0,-80\n1,-85\n1,-90\n")
    with pytest.raises(InputError, match="row 4.t_s: a second sample at the same instant"):
        load_drive_log(path)
    path.write_text("t_s,rsrp_dbm\n0,-80\n1,\n1000000000,-90\n")  # empty: no service, skipped
    with pytest.raises(InputError, match="row 4.t_s: .* after the first sample"):
        load_drive_log(path)
    path.write_text("t_s,rsrp_dbm\n0,-80\n1,\n2,-90\n")
    assert load_drive_log(path).skipped == 1
