"""Property-based fuzzing of every reader: whatever the bytes, only the project's own error type escapes, and
each case ends within 5 s (hypothesis' deadline). The whole file stays well under a minute."""

from __future__ import annotations

import json
import string
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel, ValidationError

from cellab.errors import CellabError

FUZZ = settings(max_examples=200, deadline=5000, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                       HealthCheck.too_slow], database=None)

# text that looks like the formats (keys, digits, separators, YAML syntax) mixed with anything at all
ALPHABET = string.ascii_letters + string.digits + " \n\t:,-[]{}&*!|>'\"#.%@`?~=_+/\\"
texty = st.text(alphabet=ALPHABET, max_size=400)
anything = st.one_of(texty, st.text(max_size=200), st.binary(max_size=200).map(lambda b: b.decode("latin-1")))
raw = st.one_of(st.binary(max_size=300), anything.map(str.encode))

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=12), inner, max_size=5),
    max_leaves=30,
)


def _yaml_line(key: str, value: object) -> str:
    return f"{key}: {json.dumps(value)}\n"


def _file(folder: Path, name: str, data: bytes | str) -> Path:
    path = folder / name
    path.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8", "surrogatepass"))
    return path


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("fuzz")


def only_ours(call, *args: object) -> None:
    try:
        call(*args)
    except CellabError:
        pass


# ------------------------------------------------------------------ YAML documents
CAMPAIGN_KEYS = ["name", "lab", "repeat", "order", "factors", "fixed", "schedules", "workload", "timeouts", "retry"]


@FUZZ
@given(data=raw)
def test_campaign_bytes(folder, data):
    from cellab.campaign import load_campaign

    only_ours(load_campaign, _file(folder, "c.yaml", data))


@FUZZ
@given(doc=st.dictionaries(st.sampled_from(CAMPAIGN_KEYS), json_values, max_size=6))
def test_campaign_structure(folder, doc):
    from cellab.campaign import load_campaign, plan

    path = _file(folder, "c.yaml", "".join(_yaml_line(k, v) for k, v in doc.items()))
    try:
        plan(load_campaign(path), path)
    except CellabError:
        pass


@FUZZ
@given(data=raw, doc=st.dictionaries(st.sampled_from(["name", "controller", "hosts", "agents", "devices"]),
                                     json_values, max_size=5))
def test_inventory(folder, data, doc):
    from cellab.inventory import load_inventory

    only_ours(load_inventory, _file(folder, "lab.yaml", data))
    only_ours(load_inventory, _file(folder, "lab.yaml", "".join(_yaml_line(k, v) for k, v in doc.items())))


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


csv_cell = st.one_of(st.integers().map(str), st.floats().map(str), st.text(alphabet=ALPHABET, max_size=8))
csv_rows = st.lists(st.lists(csv_cell, max_size=5).map(",".join), max_size=12).map("\n".join)


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


CALIBRATION_KEYS = ["shield_box", "ue", "earfcn", "a_dbm", "b_db_per_db", "residual_rms_db", "max_residual_db",
                    "min_db", "max_db", "points"]


@FUZZ
@given(data=raw, doc=st.dictionaries(st.sampled_from(CALIBRATION_KEYS), json_values))
def test_calibration(folder, data, doc):
    from cellab.attenuator.calibration import load_calibration, parse_calibration

    only_ours(load_calibration, _file(folder, "cal.json", data))
    try:
        cal = parse_calibration(doc, "cal.json")
    except CellabError:
        return
    assert cal.b_db_per_db > 0 and cal.min_db < cal.max_db  # a loaded calibration can be replayed
    cal.db_for(-80.0)


@FUZZ
@given(data=raw, numbers=st.lists(st.integers(min_value=-5, max_value=10**25).map(str), max_size=20))
def test_trace(folder, data, numbers):
    from cellab.traces import read_mahimahi

    only_ours(read_mahimahi, _file(folder, "t.down", data))
    try:
        trace = read_mahimahi(_file(folder, "t.down", "\n".join(numbers)))
    except CellabError:
        return
    assert trace == sorted(trace) and trace[-1] > 0


@FUZZ
@given(data=raw, body=csv_rows, header=st.sampled_from(["ms,flow,bytes", "t_ns,flow,dir,seq,ack,len", "x,y"]))
def test_probe_log(folder, data, body, header):
    from cellab.traces import trace_from_probe_log

    only_ours(trace_from_probe_log, _file(folder, "p.csv", data))
    only_ours(trace_from_probe_log, _file(folder, "p.csv", header + "\n" + body))


@FUZZ
@given(data=raw, doc=json_values)
def test_manifest(folder, data, doc):
    from cellab.store_check import read_manifest

    only_ours(read_manifest, _file(folder, "manifest.json", data))
    only_ours(read_manifest, _file(folder, "manifest.json", json.dumps(doc)))


@FUZZ
@given(data=raw)
def test_key_certificate(folder, data):
    from cellab.bus.keys import load_public_key, load_secret_key

    only_ours(load_public_key, _file(folder, "k.key", data))
    only_ours(load_secret_key, _file(folder, "k.key", data))


# ------------------------------------------------------------------ the bus's operation parameters
def _operation_models() -> list[tuple[str, type[BaseModel]]]:
    from cellab.attenuator.agent import AttenuatorAgent
    from cellab.bus.operation import _MARK, _params_model

    models = []
    for cls in AttenuatorAgent.__mro__:
        for attr, value in vars(cls).items():
            if getattr(value, _MARK, None) is not None:
                model = _params_model(value, cls)
                if model is not None:
                    models.append((f"{cls.__name__}.{attr}", model))
    return models


@FUZZ
@given(body=st.one_of(raw, json_values.map(lambda v: json.dumps(v).encode())), pick=st.integers(0, 1000))
def test_operation_parameters(body, pick):
    """What an agent does with a request body: validation errors become a reply, nothing else escapes."""
    models = _operation_models()
    assert models
    _, model = models[pick % len(models)]
    try:
        model.model_validate_json(body or b"{}")
    except ValidationError:
        pass


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
