"""Hypothesis: fuzzed schedule files and device replies never crash a driver or the player.

"Never crash" means: only the documented error types (InputError/InputErrors for files,
AttenuatorError for devices) come out, and the player always returns a result.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator

import pytest
import yaml
import zmq
from cellab.attenuator.config import AttenuatorConfig
from cellab.attenuator.driver import Attenuator, AttenuatorError, create
from cellab.attenuator.player import Player
from cellab.attenuator.schedule import SafetyLimits, check, parse_csv, parse_yaml
from cellab.attenuator.transport import LineLink
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cellab.errors import InputError, InputErrors

FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
LIMITS = SafetyLimits(channels=[1, 2], min_db=0, max_db=95, step_db=0.25, max_slew_db_per_s=500)

numbers = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.integers(-10**6, 10**6),
                    st.text(max_size=5), st.none())


@FAST
@given(st.text(max_size=300))
def test_random_csv_text(text: str) -> None:
    try:
        s = parse_csv(text, "f.csv")
        check(s, LIMITS)
    except (InputError, InputErrors):
        pass


@FAST
@given(st.lists(st.tuples(numbers, numbers, numbers), max_size=12))
def test_csv_rows_with_odd_cells(rows: list[tuple[object, object, object]]) -> None:
    text = "t_s,channel,db\n" + "".join(f"{a},{b},{c}\n" for a, b, c in rows)
    try:
        s = parse_csv(text, "f.csv")
        checked = check(s, LIMITS)
        assert all(0 <= p.db <= 95 for p in checked.points)
    except (InputError, InputErrors):
        pass


segment = st.fixed_dictionaries(
    {"kind": st.sampled_from(["hold", "ramp", "steps", "sine", "repeat", "bogus"])},
    optional={
        "db": numbers, "duration_s": st.one_of(st.floats(-1, 5), numbers), "from_db": numbers, "to_db": numbers,
        "values_db": st.lists(numbers, max_size=4), "dwell_s": st.one_of(st.floats(-1, 3), numbers),
        "mean_db": numbers, "amplitude_db": numbers, "period_s": numbers, "times": st.integers(-2, 4),
        "segments": st.lists(st.fixed_dictionaries({"kind": st.just("hold"), "db": st.floats(0, 90),
                                                     "duration_s": st.floats(0, 2)}), max_size=3),
        "channels": st.lists(st.integers(-1, 4), max_size=3),
    },
)


@FAST
@given(st.fixed_dictionaries({"segments": st.lists(segment, max_size=5)},
                             optional={"clip": st.booleans(), "update_interval_s": st.floats(0.0005, 2),
                                       "channels": st.lists(st.integers(0, 3), max_size=3)}))
def test_random_yaml_segments(doc: dict) -> None:
    text = yaml.safe_dump(doc)
    try:
        s = parse_yaml(text, "f.yaml")
        checked = check(s, LIMITS)
        assert all(0 <= p.db <= 95 for p in checked.points)
        assert [p.t_s for p in checked.points] == sorted(p.t_s for p in checked.points)
    except (InputError, InputErrors):
        pass


@FAST
@given(st.text(max_size=200))
def test_random_yaml_text(text: str) -> None:
    try:
        parse_yaml(text, "f.yaml")
    except (InputError, InputErrors):
        pass


class ScriptedLink(LineLink):
    """Answers every command with the next scripted reply (then silence → timeout)."""

    def __init__(self, replies: list[bytes]):
        super().__init__("\r\n", timeout_s=0.01)
        self.replies = list(replies)
        self._pending = b""

    def _send_bytes(self, data: bytes) -> None:
        if self.replies:
            self._pending += self.replies.pop(0)

    def _recv_some(self, timeout_s: float) -> bytes:
        data, self._pending = self._pending, b""
        return data

    def close(self) -> None:
        pass


def _scripted(model: str, transport: str, replies: list[bytes], channels: int) -> Attenuator:
    cfg = AttenuatorConfig(name="fz", model=model, transport=transport, address="127.0.0.1:1", channels=channels,  # type: ignore[arg-type]
                           min_db=0, max_db=95, step_db=0.25, timeout_s=0.01, options={"safe_retry_s": 0})
    drv = create(cfg)
    link = ScriptedLink(replies)
    attr = {"jfw-50pa": "_link"}.get(model, "_line")
    drv._open = lambda: setattr(drv, attr, link)  # type: ignore[method-assign]
    drv._close = lambda: None  # type: ignore[method-assign]
    return drv


reply_bytes = st.one_of(
    st.binary(max_size=40),
    st.sampled_from([b"1\r\n", b"0\r\n", b"2\r\n", b"12.5\r\n", b"MN=RCDAT-6000-110\r\n", b"Atten #1 = 10dB\r\n",
                     b"Syntax Error\r\n", b"Channel 1 successfully set to 10.00\r\n", b"Channel 1: 10.00\r\n",
                     b"Model: AD-USB4AR36G95\r\nDHCP: x\r\n", b"\xff\xfe\r\n", b"nan\r\n", b"inf\r\n", b"-1e309\r\n"]),
)


@FAST
@given(st.sampled_from([("minicircuits-rcdat", "telnet", 1), ("minicircuits-rc4dat", "telnet", 4),
                        ("jfw-50pa", "telnet", 4), ("adaura", "telnet", 4)]),
       st.lists(reply_bytes, max_size=8), st.floats(0, 95))
def test_drivers_survive_any_reply(backend: tuple[str, str, int], replies: list[bytes], value: float) -> None:
    model, transport, channels = backend
    drv = _scripted(model, transport, replies, channels)
    for action in (lambda: drv.set(1, value), lambda: drv.get(1), drv.info):
        try:
            action()
        except AttenuatorError:
            pass
    assert set(drv.safe_state(retry_s=0)) == set(range(1, channels + 1))  # never raises


@FAST
@given(st.lists(reply_bytes, max_size=10))
def test_player_always_returns_a_result(replies: list[bytes]) -> None:
    drv = _scripted("minicircuits-rcdat", "telnet", replies, 1)
    sched = parse_csv("t_s,channel,db\n0,1,10\n0.001,1,10.25\n0.002,1,10.5\n", "s.csv")
    res = Player(drv, sched, start_delay_s=0).run()
    assert res.status in ("completed", "failed")
    if res.status == "failed":
        assert res.error and set(res.safe_state) == {1}


class JunkRep:
    """A REP socket that answers each request with the next fuzzed reply."""

    def __init__(self) -> None:
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.REP)
        self.endpoint = f"tcp://127.0.0.1:{self.sock.bind_to_random_port('tcp://127.0.0.1')}"
        self.replies: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.serve, daemon=True)
        self.thread.start()

    def serve(self) -> None:
        while not self.stop.is_set():
            if self.sock.poll(20):
                self.sock.recv()
                self.sock.send(self.replies.pop(0) if self.replies else b"{}")


@pytest.fixture(scope="module")
def junk_rep() -> Iterator[JunkRep]:
    rep = JunkRep()
    yield rep
    rep.stop.set()
    rep.thread.join(2)
    rep.sock.close(linger=0)
    rep.ctx.term()


json_values = st.recursive(st.one_of(st.none(), st.booleans(), st.floats(), st.integers(), st.text(max_size=8)),
                           lambda c: st.one_of(st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c, max_size=3)),
                           max_leaves=6)
cell_reply = st.one_of(
    st.binary(max_size=30),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.fixed_dictionaries({"ok": json_values, "attenuation_db": json_values}).map(lambda v: json.dumps(v).encode()),
)


@FAST
@given(st.lists(cell_reply, min_size=2, max_size=2))
def test_virtual_driver_survives_any_cell_reply(junk_rep: JunkRep, replies: list[bytes]) -> None:
    junk_rep.replies = list(replies)
    drv = create(AttenuatorConfig(name="v", model="virtual", transport="zmq", address=junk_rep.endpoint,
                                  max_db=95, timeout_s=0.5))
    try:
        drv.set(1, 10)
    except AttenuatorError:
        pass
    finally:
        drv.close()


@FAST
@given(st.text(max_size=300), st.sampled_from(["csv", "jsonl"]), st.sampled_from(["s", "ms", "iso"]))
def test_random_drive_logs(text: str, kind: str, unit: str) -> None:
    from cellab.attenuator.calibration import Calibration
    from cellab.attenuator.mobility import DriveLogFormat, ReplayOptions, parse_drive_log, replay

    fmt = DriveLogFormat(kind=kind, time_unit=unit)  # type: ignore[arg-type]
    try:
        log = parse_drive_log("t_s,rsrp_dbm\n" + text if kind == "csv" else text, fmt, "d")
    except (InputError, InputErrors):
        return
    cal = Calibration(shield_box="b", ue="u", earfcn=1, a_dbm=-45, b_db_per_db=1, residual_rms_db=0,
                      max_residual_db=0, min_db=0, max_db=95)
    rep = replay(log, cal, ReplayOptions(min_db=10, max_db=90, step_db=0.25))
    assert 0 <= rep.report.clipped_share <= 1
    check(rep.schedule, SafetyLimits(channels=[1], min_db=10, max_db=90, step_db=0.25))
