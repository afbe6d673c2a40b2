"""Issue 42, hostile class "a probe log whose time goes backwards": `cellab trace from-probe` refuses it naming the
row, the flow and both times (it used to sort the rows, merging two stretches of a recording into one trace), and
the probe's own reader (`cellab-probe analyze --events`) reports it as an error and stops there. Flows that
interleave (a quiet flow's earlier millisecond after a busy one's) are not a step of the clock and still read."""

from __future__ import annotations

import json
import subprocess

import pytest

from cellab.paths import find_program
from cellab.tests.test_bad_input import cellab, refused

pytestmark = pytest.mark.background  # no clock, no root

MS_HEADER = "ms,flow,bytes,packets,acks,rtt_mean_us,rwnd_bytes\n"
PKT_HEADER = "# cellab-probe events v1\nt_ns,flow,dir,seq,ack,len,win,has_ts,tsval,tsecr\n"


def _ms_rows(*rows: tuple[int, int]) -> str:
    return MS_HEADER + "".join(f"{ms},{flow},1500,1,0,,0\n" for ms, flow in rows)


def _pkt_rows(*rows: tuple[int, int]) -> str:
    return PKT_HEADER + "".join(f"{t},{flow},0,{i * 1448 + 1},0,1448,0,0,0,0\n" for i, (t, flow) in enumerate(rows))


@pytest.mark.parametrize(("text", "says"), [
    (_ms_rows((1000, 0), (1001, 0), (999, 0)), "row 4.ms: time goes back in flow 0: 999 after 1001 (row 3)"),
    (_ms_rows((1000, 0), (1000, 1), (1005, 1), (1002, 1)), "row 5.ms: time goes back in flow 1: 1002 after 1005"),
    (_ms_rows((1_700_000_000_000, 0), (1_699_999_990_000, 0)), "row 3.ms: time goes back in flow 0"),
    (_pkt_rows((2_000_000, 0), (3_000_000, 0), (1_000_000, 0)), "row 5.t_ns: time goes back in flow 0: 1000000"),
])
def test_trace_from_a_log_whose_time_goes_back_is_refused(capsys, tmp_path, text, says):
    log = tmp_path / "probe.csv"
    log.write_text(text)
    refused(capsys, ["trace", "from-probe", str(log), "--out", str(tmp_path / "t.down")], str(log), says)
    assert not (tmp_path / "t.down").exists()


@pytest.mark.parametrize("text", [_ms_rows((1000, 0), (1003, 0), (1001, 1), (1004, 0), (1004, 1)),
                                  _pkt_rows((1_000_000, 0), (1_000_000, 0), (2_500_000, 1), (2_000_000, 0))])
def test_interleaved_flows_still_make_a_trace(capsys, tmp_path, text):
    log = tmp_path / "probe.csv"
    log.write_text(text)
    code, said = cellab(capsys, "trace", "from-probe", str(log), "--out", str(tmp_path / "t.down"))
    assert code == 0, said
    assert (tmp_path / "t.down").read_text().split()


def test_the_probe_analyzer_stops_where_time_goes_back(tmp_path):
    log = tmp_path / "events.csv"
    log.write_text(_pkt_rows((1_000_000_000, 0), (1_001_000_000, 0), (900_000_000, 0)))
    summary = tmp_path / "s.json"
    done = subprocess.run([str(find_program("cellab-probe")), "analyze", "--events", str(log), "--summary",
                           str(summary)], capture_output=True, text=True, timeout=60)
    result = json.loads(summary.read_text())
    assert done.returncode != 0 and result["status"] != "ok"
    assert any("line 5: time goes back in flow 0: 900000000 after 1001000000 ns" in e for e in result["errors"])
