"""Issue 42, hostile class "schedules that cannot be played": two values at one instant on one channel, a sine
whose period is below the sampling interval, a jump hidden in a near-zero ramp (or step, or hold) under a slew
limit, and a device step larger than the device's range. Each is refused by `cellab atten check` and
`cellab validate`, naming the file, the row or segment and the field; playable schedules still pass."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from attenuator.schedule import SafetyLimits, check, load
from cellab.errors import InputError, InputErrors
from cellab.tests.test_bad_input import cellab, refused

pytestmark = pytest.mark.background  # no clock, no root


def attenuator_file(tmp_path: Path, **changes: object) -> Path:
    entry = {"name": "a1", "model": "minicircuits-rudat", "transport": "telnet", "address": "127.0.0.1:9",
             "max_db": 95, "max_slew_db_per_s": 10, **changes}
    path = tmp_path / "atten.yaml"
    path.write_text(yaml.safe_dump(entry))
    return path


def yaml_schedule(tmp_path: Path, segments: list, **top: object) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump({"segments": segments, **top}))
    return path


def test_a_playable_schedule_passes(capsys, tmp_path):
    path = yaml_schedule(tmp_path, [{"kind": "hold", "db": 10, "duration_s": 2},
                                    {"kind": "ramp", "from_db": 10, "to_db": 30, "duration_s": 4},
                                    {"kind": "sine", "mean_db": 30, "amplitude_db": 1, "period_s": 2, "duration_s": 2},
                                    {"kind": "hold", "db": 30, "duration_s": 0}])
    code, text = cellab(capsys, "atten", "check", str(path), "--config", str(attenuator_file(tmp_path)))
    assert code == 0, text


@pytest.mark.parametrize("rows", [["0,1,10", "0,1,20"], ["0,1,10", "1,1,20", "1,2,5", "1,1,20"]])
def test_two_values_at_one_instant_on_one_channel_are_refused(capsys, tmp_path, rows):
    path = tmp_path / "s.csv"
    path.write_text("t_s,channel,db\n" + "\n".join(rows) + "\n")
    refused(capsys, ["validate", str(path)], str(path), f"row {len(rows) + 1}.t_s: channel 1 has a second value")


@pytest.mark.parametrize(("segments", "top", "says"), [
    ([{"kind": "hold", "db": 10, "duration_s": 0}, {"kind": "hold", "db": 60, "duration_s": 5}], {},
     "a 0 s hold before the last segment"),
    ([{"kind": "hold", "db": 10, "duration_s": 5}], {"channels": [1, 1]}, "channels: channels [1, 1] name a channel twice"),
    ([{"kind": "hold", "db": 10, "duration_s": 5, "channels": [2, 2]}], {"channels": [1, 2]}, "name a channel twice"),
    ([{"kind": "repeat", "times": 3, "segments": [{"kind": "hold", "db": 10, "duration_s": 0},
                                                 {"kind": "hold", "db": 20, "duration_s": 1}]}], {},
     "a 0 s hold inside a repeat"),
])
def test_two_values_at_one_instant_in_yaml_are_refused(capsys, tmp_path, segments, top, says):
    path = yaml_schedule(tmp_path, segments, **top)
    refused(capsys, ["validate", str(path)], str(path), says)


@pytest.mark.parametrize(("period_s", "interval_s"), [(0.05, 0.1), (0.1, 0.1), (0.15, 0.1), (0.001, 0.5)])
def test_a_sine_period_below_the_sampling_interval_is_refused(capsys, tmp_path, period_s, interval_s):
    path = yaml_schedule(tmp_path, [{"kind": "sine", "mean_db": 40, "amplitude_db": 10, "period_s": period_s,
                                     "duration_s": 5}], update_interval_s=interval_s)
    refused(capsys, ["validate", str(path)], str(path), "segment 1: period_s", "the sine cannot be played")


@pytest.mark.parametrize("hidden", [
    {"kind": "ramp", "from_db": 10, "to_db": 60, "duration_s": 1e-10},
    {"kind": "ramp", "from_db": 10, "to_db": 60, "duration_s": 1e-4},
    {"kind": "steps", "values_db": [10, 60], "dwell_s": 1e-12},
    {"kind": "hold", "db": 60, "duration_s": 1e-7},
])
def test_a_jump_hidden_in_a_near_zero_segment_is_refused(capsys, tmp_path, hidden):
    # 10 dB held 5 s, then 50 dB more in no time: 10 dB/s on average between the points, a jump when played
    path = yaml_schedule(tmp_path, [{"kind": "hold", "db": 10, "duration_s": 5}, hidden,
                                    {"kind": "hold", "db": 60, "duration_s": 5}])
    refused(capsys, ["atten", "check", str(path), "--config", str(attenuator_file(tmp_path))], str(path),
            f"segments[1].{hidden['kind']}.", "0.001")


def test_a_short_but_playable_ramp_meets_the_slew_limit(tmp_path):
    path = yaml_schedule(tmp_path, [{"kind": "hold", "db": 10, "duration_s": 5},
                                    {"kind": "ramp", "from_db": 10, "to_db": 60, "duration_s": 0.002},
                                    {"kind": "hold", "db": 60, "duration_s": 5}])
    with pytest.raises(InputError, match="above max_slew_db_per_s=10"):
        check(load(path), SafetyLimits(max_db=95, max_slew_db_per_s=10))


@pytest.mark.parametrize(("changes", "says"), [
    ({"min_db": 0, "max_db": 5, "step_db": 10}, "step_db (10.0) is larger than the range"),
    ({"min_db": 30, "max_db": 31, "step_db": 2}, "step_db (2.0) is larger than the range"),
])
def test_a_device_step_larger_than_its_range_is_refused(capsys, tmp_path, changes, says):
    path = yaml_schedule(tmp_path, [{"kind": "hold", "db": 30, "duration_s": 1}])
    config = attenuator_file(tmp_path, **changes)
    refused(capsys, ["atten", "check", str(path), "--config", str(config)], str(config), says)


def test_a_step_beyond_the_range_is_refused_unless_clipped(tmp_path):
    path = yaml_schedule(tmp_path, [{"kind": "steps", "values_db": [10, 500, 10], "dwell_s": 1}])
    with pytest.raises((InputError, InputErrors), match=r"500.0 dB at t=1.0 s is outside the safety limits"):
        check(load(path), SafetyLimits(max_db=95))
