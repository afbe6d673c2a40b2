"""srsue's RRC events read from its log (rrc_level info): a radio link failure and the re-establishment after it,
on the wall clock, with the UE's state after them; lines of other layers, other RRC lines, broken timestamps and
lines before the run are left out. The lines are srsue 23.04's as this lab's runs wrote them."""

from __future__ import annotations

from datetime import datetime

from cellab.ran.ue_events import RrcEventTail, rrc_state

LOG = """\
2026-11-26T14:13:29.241385 [RRC    ] [I] Set Constants and Timers: N310=1, N311=1, t300=2000, t301=100, t310=200, t311=10000
2026-11-26T14:13:31.009128 [RRC    ] [I] Detected 1 out-of-sync from PHY. Trying to resync. Starting T310 timer 200 ms
2026-11-26T14:13:31.009500 [PHY    ] [W] [ 3827] SNR=1.0 dB RSRP=30.7 dBm, sync=out-of-sync from channel estimator
2026-11-26T14:13:31.411743 [RRC    ] [I] Timer T310 expired: Radio Link Failure
2026-11-26T14:13:31.411774 [RRC    ] [I] Detected Radio-Link Failure with active AS security. Starting ConnectionReestablishment...
2026-11-26T14:13:34.402738 [RRC    ] [I] SRB0 - Tx rrcConnectionReestablishmentRequest (6 B)
2026-11-26T14:13:34.452913 [RRC    ] [I] SRB0 - Rx rrcConnectionReestablishment (20 B)
2026-11-26T14:13:34.453147 [RRC    ] [I] SRB1 - Tx rrcConnectionReestablishmentComplete (2 B)
2026-11-26T99:13:35.000000 [RRC    ] [I] Timer T310 expired: Radio Link Failure
2026-11-26T14:13:35.928063 [RRC    ] [I] Detected 1 out-of-sync from PHY. Trying to resync. Starting T310 timer 200 ms
2026-11-26T14:13:36.443115 [RRC    ] [I] Timer T310 expired: Radio Link Failure
"""


def _t(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def test_an_rlf_and_its_reestablishment_are_read_with_their_wall_times(tmp_path):
    log = tmp_path / "srsue.log"
    log.write_text(LOG)
    events = RrcEventTail(log, 1).events(since_s=_t("2026-11-26T14:13:30"))
    assert [(e["event"], e["ue"]) for e in events] == [
        ("t310_start", 1), ("rlf", 1), ("reest_start", 1), ("reest_complete", 1), ("t310_start", 1), ("rlf", 1)]
    assert events[1]["t_s"] == _t("2026-11-26T14:13:31.411743")
    assert round(events[1]["t_s"] - events[0]["t_s"], 3) == 0.403  # T310's 200 ms on a half-speed stack
    assert rrc_state(events[:4], attached=True) == "connected"
    assert rrc_state(events, attached=True) == "reestablishing"  # the last RLF has no way back yet
    assert rrc_state([], attached=False) == "idle"
    assert RrcEventTail(log, 0).events(since_s=_t("2026-11-26T14:13:36")) == [
        {"event": "rlf", "ue": 0, "t_s": _t("2026-11-26T14:13:36.443115")}]
    assert RrcEventTail(tmp_path / "missing.log", 0).events() == []


def test_a_tail_reads_events_as_the_log_grows_and_lines_cut_anywhere(tmp_path):
    log = tmp_path / "srsue.log"
    tail = RrcEventTail(log, 0)
    assert tail.events() == []  # not written yet
    cut = LOG.index("Timer T310 expired") + 5
    log.write_text(LOG[:cut])
    assert [e["event"] for e in tail.events()] == ["t310_start"]
    with open(log, "a") as out:
        out.write(LOG[cut:])
    assert [e["event"] for e in tail.events()] == ["t310_start", "rlf", "reest_start", "reest_complete",
                                                   "t310_start", "rlf"]
