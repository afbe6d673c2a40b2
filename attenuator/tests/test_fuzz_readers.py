"""The attenuator room's readers under fuzzing: schedule YAML and CSV, drive logs, calibrations, the schedule
texts play_schedule receives, and a Mini-Circuits box's replies. Only the project's own error may escape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cellab.errors import CellabError
from cellab.fuzzing import FUZZ, anything, csv_rows, json_values, only_ours, raw, write_file


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


CALIBRATION_KEYS = ["shield_box", "ue", "earfcn", "a_dbm", "b_db_per_db", "residual_rms_db", "max_residual_db",
                    "min_db", "max_db", "points"]


SEGMENT = st.fixed_dictionaries({"kind": st.sampled_from(["hold", "ramp", "steps", "sine", "repeat", "x"])},
                                optional={"db": json_values, "duration_s": json_values, "from_db": st.floats(),
                                          "to_db": st.floats(), "values_db": json_values, "dwell_s": st.floats(),
                                          "times": st.integers(), "segments": json_values, "channels": json_values,
                                          "mean_db": st.floats(), "amplitude_db": st.floats(),
                                          "period_s": st.floats()})


@FUZZ
@given(text=anything, segments=st.lists(SEGMENT, max_size=4), interval=json_values)
def test_schedule_yaml(text, segments, interval):
    from cellab.attenuator.schedule import parse_yaml

    only_ours(parse_yaml, text, "s.yaml")
    only_ours(parse_yaml, json.dumps({"segments": segments, "update_interval_s": interval}), "s.yaml")


@FUZZ
@given(text=anything, body=csv_rows)
def test_schedule_csv(text, body):
    from cellab.attenuator.schedule import parse_csv

    only_ours(parse_csv, text, "s.csv")
    only_ours(parse_csv, "t_s,channel,db\n" + body, "s.csv")


@FUZZ
@given(text=anything, body=csv_rows, lines=st.lists(json_values, max_size=6))
def test_drive_log(text, body, lines):
    from cellab.attenuator.mobility import ANDROID_SIGNAL_LOG, DriveLogFormat, parse_drive_log

    only_ours(parse_drive_log, text, DriveLogFormat(), "d.csv")
    only_ours(parse_drive_log, "t_s,rsrp_dbm\n" + body, DriveLogFormat(), "d.csv")
    only_ours(parse_drive_log, "\n".join(json.dumps(x) for x in lines), ANDROID_SIGNAL_LOG, "d.jsonl")


@FUZZ
@given(data=raw, doc=st.dictionaries(st.sampled_from(CALIBRATION_KEYS), json_values))
def test_calibration(folder, data, doc):
    from cellab.attenuator.calibration import load_calibration, parse_calibration

    only_ours(load_calibration, write_file(folder, "cal.json", data))
    try:
        cal = parse_calibration(doc, "cal.json")
    except CellabError:
        return
    assert cal.b_db_per_db > 0 and cal.min_db < cal.max_db  # a loaded calibration can be replayed
    cal.db_for(-80.0)


@FUZZ
@given(schedule=anything)
def test_play_schedule_texts(schedule):
    """play_schedule's schedule_csv / schedule_yaml texts go through the schedule parsers."""
    from cellab.attenuator.schedule import parse_csv, parse_yaml

    only_ours(parse_csv, schedule, "play_schedule.schedule_csv")
    only_ours(parse_yaml, schedule, "play_schedule.schedule_yaml")


# ------------------------------------------------------------------ the attenuator emulators' replies
@FUZZ
@given(reply=st.one_of(anything, st.sampled_from(["1", "2", "0", "", "inf", "nan", "1e400", "12.5 dB"])),
       channels=st.sampled_from([1, 4]))
def test_minicircuits_replies(reply, channels):
    from cellab.attenuator.config import AttenuatorConfig
    from cellab.attenuator.driver import create

    cfg = AttenuatorConfig(name="a", model="minicircuits-rc4dat", transport="http", address="http://127.0.0.1:1",
                           channels=channels, max_db=90)
    drv = create(cfg)
    drv.command = lambda _text: reply  # the device's answer to whatever was asked
    only_ours(drv._read, 1)
    only_ours(drv._write, 1, 10.0)
    only_ours(drv._describe)
