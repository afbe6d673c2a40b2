"""The virtual cell's radio link failure model (rrc.c, issue 28): an outage shorter than T310 leaves the UE
connected; a longer one is a radio link failure, the UE out of connected mode (nothing scheduled, the TTI log's
flag 128) until it re-establishes reest_ms after the cell is back in sync; after the eNB released its context
(rlf_release_ms) it sets up a new connection instead; the S1 cut loses what crosses it. Every duration checked
here is in TTIs from the cell's own events, so a host stall between two control requests cannot fake one
(it can only lengthen an outage, which the assertions read back from the events). Root: namespaces."""

from __future__ import annotations

import subprocess
import time

import pytest
from cellab.emulator.ttilog import read_ttilog

from cellab.faults.recovery import read_cell_events
from cellab.labs.cellctl import CellControlError

T310, REEST, CONNECT = 200, 150, 300
OUT_DB, IN_DB = 95.0, 20.0


def _events(lab, name: str | None = None) -> list[dict]:
    events = read_cell_events(lab.cell_log)
    return [e for e in events if name is None or e["event"] == name]


def _outage(lab, seconds: float) -> None:
    lab.set_ue_attenuation(0, OUT_DB)
    time.sleep(seconds)
    lab.set_ue_attenuation(0, IN_DB)


def _outage_ttis(lab) -> tuple[int, int]:
    """(start, end) TTI of the last outage, from the cell's attenuation events."""
    marks = [e for e in _events(lab, "attenuation")]
    start = next(e["tti"] for e in reversed(marks) if e["attenuation_db"] == OUT_DB)
    end = next(e["tti"] for e in marks if e["tti"] > start and e["attenuation_db"] == IN_DB)
    return start, end


def _next_frame(tti: int) -> int:
    return tti if tti % 10 == 0 else tti + 10 - tti % 10


def test_short_outage_keeps_the_ue_connected_and_a_long_one_re_establishes(vlab, on_time):
    lab = vlab(rlf=True, attenuation_db=IN_DB, t310_ms=T310, reest_ms=REEST)

    def short() -> tuple[int, int]:
        _outage(lab, 0.08)
        time.sleep(0.1)
        return _outage_ttis(lab)

    start, end = on_time(lab, short, late_tti_ms=50)
    if end - start < T310:  # the cell saw less than T310 of outage: T310 started and stopped, no RLF
        assert _events(lab, "t310_start") and _events(lab, "t310_stop"), _events(lab)
        assert not _events(lab, "rlf")
    assert lab.ue_stats()[0]["rrc_state"] == "connected"

    def long() -> tuple[int, int]:
        _outage(lab, 0.6)
        time.sleep(0.4)
        return _outage_ttis(lab)

    start, end = on_time(lab, long, late_tti_ms=50)
    t310 = [e["tti"] for e in _events(lab, "t310_start") if e["tti"] >= start][0]
    assert t310 == _next_frame(start)  # N310 = 1: the first out-of-sync frame starts T310
    (rlf,) = [e["tti"] for e in _events(lab, "rlf")]
    assert rlf - t310 == T310
    (reest_start,) = [e["tti"] for e in _events(lab, "reest_start")]
    assert reest_start == _next_frame(end)  # back in sync at the next frame after the link returned
    (done,) = _events(lab, "reest_complete")
    assert done["tti"] - reest_start == REEST
    assert done["since_rlf_ms"] == done["tti"] - rlf
    stats = lab.ue_stats()[0]
    assert stats["rrc_state"] == "connected" and stats["rlf_count"] == 1 and stats["reest_count"] == 1
    assert not _events(lab, "context_release")  # 4 s of srsenb's rlf_release_timer_ms: far off
    # the TTI log: out of connected mode (flag 128) exactly from the RLF to the re-establishment, nothing
    # scheduled then although the channel was back for part of it
    lab.collect(lab.state_dir / "collect")
    rec = read_ttilog(lab.state_dir / "collect" / "cell_tti.bin").ue(0)
    off = rec["tti"][(rec["flags"] & 128) != 0]
    assert off.min() == rlf and off.max() == done["tti"] - 1 and off.size == done["tti"] - rlf
    during = (rec["tti"] >= rlf) & (rec["tti"] < done["tti"])
    assert rec["dl_prb"][during].sum() == 0 and rec["dl_capacity_bytes"][during].sum() == 0
    assert (rec["cqi"][(rec["tti"] >= end + 100) & (rec["tti"] < done["tti"])] > 0).any() or REEST < 100


def test_after_the_context_release_the_ue_connects_anew(vlab, on_time):
    lab = vlab(rlf=True, attenuation_db=IN_DB, t310_ms=T310, rlf_release_ms=300, connect_ms=CONNECT)

    def outage() -> tuple[int, int]:
        _outage(lab, 0.8)
        time.sleep(0.6)
        return _outage_ttis(lab)

    start, end = on_time(lab, outage, late_tti_ms=50)
    (rlf,) = [e["tti"] for e in _events(lab, "rlf")]
    (release,) = [e["tti"] for e in _events(lab, "context_release")]
    assert release - rlf == 300
    assert not _events(lab, "reest_start") and not _events(lab, "reest_complete")
    (begin,) = _events(lab, "connect_start")
    assert begin["after"] == "reestablishment_reject" and begin["tti"] == _next_frame(end)
    (done,) = [e["tti"] for e in _events(lab, "connect_complete")]
    assert done - begin["tti"] == CONNECT
    assert lab.ue_stats()[0]["connect_count"] == 1


def _ping(lab, count: int) -> int:
    """Pings from the server to UE 0 (0.2 s apart); how many came back."""
    out = subprocess.run(["ip", "netns", "exec", lab.srv_ns, "ping", "-n", "-q", "-c", str(count), "-i", "0.2",
                          "-W", "1", "10.200.1.1"], capture_output=True, text=True, timeout=30).stdout
    return int(out.split(" received")[0].rsplit(" ", 1)[-1]) if " received" in out else 0


@pytest.mark.parametrize("path", ["s1", "sgi"])
def test_a_cut_path_loses_what_crosses_it_and_the_ue_stays_connected(vlab, path):
    lab = vlab(attenuation_db=IN_DB, core_delay_ms=5)
    assert _ping(lab, 2) == 2
    with lab.control() as ctl:
        assert ctl.request(f"set_{path}", up=False)[f"{path}_up"] is False
        ctl.request(f"set_{path}", up=False)  # no change, no second event
        assert _ping(lab, 3) == 0
        stats = ctl.stats()
        assert stats[f"{path}_up"] is False and stats[f"{path}_cuts"] == 1
        assert ctl.request(f"set_{path}", up=True)[f"{path}_up"] is True
        with pytest.raises(CellControlError, match="up: must be true or false"):
            ctl.request(f"set_{path}", up="down")
    assert _ping(lab, 2) == 2
    stats = lab.status()["cell"]
    dropped = stats["ues"][0]["s1_drop_pkts"] if path == "s1" else stats["sgi_drop_pkts"]
    assert dropped >= 3  # the echo requests (S1: at the eNB's end of the core; SGi: as they left the server)
    names = [e["event"] for e in _events(lab) if e["event"].startswith(path + "_")]
    assert names == [f"{path}_down", f"{path}_up"]
