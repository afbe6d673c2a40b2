"""The attenuator room's readers under fuzzing: schedule YAML and CSV, drive logs, calibrations, the schedule
texts play_schedule receives, and a Mini-Circuits box's replies. Only the project's own error may escape."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cellab.errors import CellabError
from cellab.testkit.fuzzing import FUZZ, anything, csv_rows, json_values, only_ours, raw, write_file


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


class ScriptedLink:
    """A line link whose device says these lines, then nothing (a timeout, as a quiet device gives)."""

    def __init__(self, lines: list[str]):
        self.lines = list(lines)

    def drain(self) -> None:
        pass

    def send(self, _text: str) -> None:
        pass

    def readline(self, _timeout_s: float | None = None) -> str:
        from cellab.attenuator.driver import AttenuatorError

        if not self.lines:
            raise AttenuatorError("no reply within 0.1 s")
        return self.lines.pop(0)


REPLY_LINE = st.one_of(anything, st.sampled_from(["Atten #1 = 31.5dB", "Atten #1 = ..dB", "Atten #1 = +-dB",
                                                   "Atten #2 = 1e400dB", "Channel 1 successfully set to -.",
                                                   "Channel 1: 1e999", "Channel 1: .", "Syntax error"]))


@FUZZ
@given(lines=st.lists(REPLY_LINE, max_size=8), model=st.sampled_from(["jfw-50pa", "adaura"]))
def test_jfw_and_adaura_replies(lines, model):
    """Whatever a JFW or Adaura box prints (garbled numbers, other ports, endless chatter), the driver ends
    with a reading or the project's own error, within its timeout."""
    from cellab.attenuator.config import AttenuatorConfig
    from cellab.attenuator.driver import create

    cfg = AttenuatorConfig(name="a", model=model, transport="serial", address="/dev/null", channels=4, max_db=90,
                           timeout_s=0.2)
    for call, args in (("_read", (1,)), ("_write", (1, 10.0)), ("_describe", ())):
        drv = create(cfg)
        link = ScriptedLink(lines)
        drv._link = drv._line = link
        only_ours(getattr(drv, call), *args)


@FUZZ
@given(reply=st.one_of(anything, st.sampled_from(["0", "+0,\"No error\"", "1e400", "nan", "..", "-5,\"x\""])))
def test_keysight_replies(reply):
    from cellab.attenuator.config import AttenuatorConfig
    from cellab.attenuator.driver import create

    cfg = AttenuatorConfig(name="a", model="keysight-11713c", transport="visa", address="GPIB0::28::INSTR",
                           channels=1, max_db=81)

    class Instrument:
        def write(self, _text: str) -> None:
            pass

        def query(self, _text: str) -> str:
            return reply

    drv = create(cfg)
    drv._inst = Instrument()
    drv._models = {(1, "X"): "AG8494H", (1, "Y"): "AG8496H"}
    for call, args in (("_read", (1,)), ("_write", (1, 10.0)), ("_describe", ())):
        only_ours(getattr(drv, call), *args)


def test_a_jfw_box_that_chatters_without_naming_the_port_ends_within_its_timeout():
    import time

    from cellab.attenuator.config import AttenuatorConfig
    from cellab.attenuator.driver import AttenuatorError, create

    class Chatter(ScriptedLink):
        def readline(self, _timeout_s: float | None = None) -> str:
            time.sleep(0.001)
            return "Atten #2 = 10dB"  # another port, forever

    drv = create(AttenuatorConfig(name="a", model="jfw-50pa", transport="serial", address="/dev/null", channels=4,
                                  max_db=90, timeout_s=0.3))
    drv._link = Chatter([])
    started = time.monotonic()
    with pytest.raises(AttenuatorError, match="no reading for port 1 within 0.3 s"):
        drv._read(1)
    assert time.monotonic() - started < 1.0
