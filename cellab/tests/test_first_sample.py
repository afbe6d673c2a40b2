"""Issue 40: a run's first sample is taken only after its attenuation is read back and each UE's signal sample is
newer than that confirmation (cellab.run.first_sample); a wait that runs out flags the run stale-telemetry."""

from __future__ import annotations

import time

from cellab.bus import OperationError
from cellab.contracts.attenuator import SetResult
from cellab.contracts.ue import NO_RADIO_FIELD, SignalReading
from cellab.results.flags import run_flags
from cellab.run.first_sample import confirm_start


class Box:
    """An attenuator agent whose readback shows the old value (max_db) for its first `lag` reads."""

    def __init__(self, lag: int, old_db: float = 60.0):
        self.lag, self.old_db, self.reads = lag, old_db, 0
        self.set_db: dict[int, float] = {}

    def get(self, box: str, channel: int) -> SetResult:
        self.reads += 1
        value = self.old_db if self.reads <= self.lag else self.set_db[channel]
        return SetResult(attenuator=box, channel=channel, applied_db=value)


class Ue:
    """A UE agent (clock `offset_s` ahead of the controller's) whose first `stale` samples were taken before the
    read began (a phone's cached report), each at RSRP -110 dBm; then samples taken now at `rsrp_dbm`."""

    def __init__(self, agent: str, stale: int, offset_s: float = 0.0, rsrp_dbm: float = -85.0):
        self.agent, self.stale, self.offset_s, self.rsrp_dbm, self.calls = agent, stale, offset_s, rsrp_dbm, 0

    def signal(self) -> SignalReading:
        self.calls += 1
        now = time.time() + self.offset_s
        if self.calls <= self.stale:
            return SignalReading(rsrp_dbm=-110, source="test", t_s=now - 30.0)
        return SignalReading(rsrp_dbm=self.rsrp_dbm, source="test", t_s=now)


def _check(box: Box, ues: dict, wait_s: float = 5.0, **kw):
    box.set_db = {1: 40.0, 2: 20.0}
    return confirm_start(box, "box", dict(box.set_db), 0.25, ues, {u.agent: u.offset_s for u in ues.values()},
                         wait_s=wait_s, sleep=lambda s: None, **kw)


def test_the_first_sample_comes_after_the_readback_and_is_fresh():
    box, phone, virtual = Box(lag=3), Ue("a-phone", stale=4, offset_s=120.0), Ue("a-vue", stale=0, offset_s=-3.0)
    check = _check(box, {"phone": phone, "vue": virtual})
    assert check.confirmed_db == {1: 40.0, 2: 20.0} and box.reads == 5  # 3 reads at max_db, then each channel
    assert check.stale == [] and set(check.fresh) == {"phone", "vue"}
    assert phone.calls == 5 and check.fresh["phone"]["rsrp_dbm"] == -85.0  # the cached -110 dBm left out
    assert all(f["after_confirmed_s"] >= -0.01 for f in check.fresh.values())  # on the controller's clock
    assert run_flags({"first_sample": check.as_metrics()}, {}) == {}


def test_a_wait_that_runs_out_flags_the_run_and_says_what_was_missing():
    phone = Ue("a-phone", stale=10**9)
    started = time.monotonic()
    check = _check(Box(lag=0), {"phone": phone}, wait_s=0.3)
    assert time.monotonic() - started < 3  # bounded
    assert len(check.stale) == 1 and "UE phone: no signal sample after the attenuation was confirmed within 0.3 s" \
        in check.stale[0] and "s before the confirmation" in check.stale[0], check.stale
    flags = run_flags({"first_sample": check.as_metrics()}, {})
    assert "run start: UE phone" in flags["stale-telemetry"]


def test_a_channel_that_never_reads_back_is_named():
    check = _check(Box(lag=10**9), {"phone": Ue("p", stale=0)}, wait_s=0.2)
    assert check.stale and check.stale[0].startswith("attenuator box channel 1: not read back at 40 dB"), check.stale
    assert check.fresh == {}


def test_a_ue_without_a_radio_is_not_waited_for():
    class NoRadio:
        agent, offset_s = "srsue", 0.0

        def signal(self):
            raise OperationError("srsue", "signal", "this UE has no radio to read", field=NO_RADIO_FIELD)

    check = _check(Box(lag=0), {"ue1": NoRadio(), "phone": Ue("p", stale=1)})
    assert check.no_radio == ["ue1"] and check.stale == [] and "phone" in check.fresh


def test_the_jump_heuristic_takes_the_level_the_run_began_at_before_its_schedules_first_point():
    # the phone read -60 dBm at 0 dB, then -80 dBm after the schedule's first point (20 dB at 1.0 s): explained
    timeline = {"rsrp_dbm.ue0": {"t_s": [0.1, 1.1], "v": [-60.0, -80.0]},
                "attenuation_db": {"t_s": [1.0, 2.0], "v": [20.0, 40.0]}}
    began_at_0_db = {"confirmed_db": {"1": 0.0}, "stale": []}
    assert run_flags({"timeline": timeline, "first_sample": began_at_0_db}, {}) == {}
    # without the level the run began at (an older run), the line's first value stands for its start: flagged
    assert "ue0: first RSRP -60 dBm" in run_flags({"timeline": timeline}, {})["stale-telemetry"]
    # a first reading the start level does not explain either (a cached -110 dBm) is still flagged
    cached = {"rsrp_dbm.ue0": {"t_s": [0.1, 1.1], "v": [-110.0, -80.0]}, "attenuation_db": timeline["attenuation_db"]}
    assert "ue0: first RSRP -110 dBm" in run_flags({"timeline": cached, "first_sample": began_at_0_db},
                                                   {})["stale-telemetry"]
