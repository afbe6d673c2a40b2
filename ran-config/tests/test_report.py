"""The JSON report reader on srsENB's real format: the recorded sample (../shared/data/srsran-sample) and a
stream written in pieces, cut inside objects and inside a UTF-8 character."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cellab.ran.report import ReportTail, read_report, sr_ground_truth, ue_metrics

SAMPLE = Path(__file__).resolve().parents[2].parent / "shared/data/srsran-sample/enb_report.json"


def _metrics(t_s: float, rnti: int, cqi: float, dl_buffered: int) -> dict:
    ue = {"ue_rnti": rnti, "dl_cqi": cqi, "dl_mcs": 27.5, "dl_bitrate": 1.5e6, "dl_bler": 0.01, "ul_snr": 20.5,
          "ul_mcs": 20.0, "ul_bitrate": 8e4, "ul_bler": 0.0, "ul_phr": 30.0, "ul_bsr": 1200,
          "bearer_list": [{"bearer_container": {"bearer_id": 3, "qci": 9, "dl_total_bytes": 5000,
                                                "ul_total_bytes": 700, "dl_buffered_bytes": dl_buffered,
                                                "ul_buffered_bytes": 40}}]}
    return {"type": "metrics", "timestamp": t_s, "cell_list": [{"cell_container": {
        "carrier_id": 0, "pci": 1, "nof_rach": 1, "ue_list": [{"ue_container": ue}]}}]}


def _setup(rnti: int, index: int) -> dict:
    asn1 = json.dumps([{"DL-CCCH-Message": {"message": {"c1": {"rrcConnectionSetup": {"criticalExtensions": {"c1": {
        "rrcConnectionSetup-r8": {"radioResourceConfigDedicated": {"physicalConfigDedicated": {
            "schedulingRequestConfig": {"setup": {"sr-PUCCH-ResourceIndex": 0, "sr-ConfigIndex": index,
                                                  "dsr-TransMax": "n64"}}}}}}}}}}}}], indent=0)
    return {"type": "event", "timestamp": 2.0, "carrier_id": 0, "cell_id": 1, "event_name": "rrc_log",
            "event_data": {"rnti": rnti, "asn1_length": len(asn1), "asn1_message": asn1, "asn1_type": 1}}


def test_incremental_reads_cut_anywhere(tmp_path: Path):
    objs = [_metrics(1.0, 70, 15.0, 0), _setup(70, 42), _metrics(2.0, 70, 9.0, 3000),
            {"type": "event", "event_name": "sector_stop", "note": "ünïcode"}]
    text = "Software Radio Systems RAN (srsRAN) banner line\n" + "".join(json.dumps(o, indent=2) + "\n" for o in objs)
    data = text.encode()
    path = tmp_path / "enb_report.json"
    tail = ReportTail(path)
    assert tail.read_new() == []  # not there yet
    got: list[dict] = []
    step = 37  # odd-sized pieces: cuts land inside objects, strings and the two-byte characters
    for i in range(0, len(data), step):
        with open(path, "ab") as out:
            out.write(data[i:i + step])
        got += tail.read_new()
    assert got == objs


def test_metrics_and_ground_truth_from_objects():
    samples = ue_metrics(_metrics(3.5, 71, 12.0, 2500))
    assert len(samples) == 1
    ue = samples[0]
    assert (ue.rnti, ue.dl_cqi, ue.ul_bsr_bytes, ue.dl_buffered_bytes, ue.ul_snr_db, ue.t_s) == (71, 12.0, 1200, 2500,
                                                                                                20.5, 3.5)
    truth = sr_ground_truth(_setup(71, 42))
    assert truth is not None
    assert (truth.sr_period_ms, truth.sr_offset_ms, truth.sr_config_index, truth.source, truth.rnti) == (
        40, 7, 42, "rrc", 71)
    assert sr_ground_truth(_metrics(1.0, 70, 15.0, 0)) is None


def test_recorded_sample_report():
    if not SAMPLE.exists():
        pytest.skip(f"{SAMPLE} is absent")
    objs = read_report(SAMPLE)
    kinds = [o["type"] for o in objs]
    assert kinds.count("metrics") > 10 and kinds.count("event") >= 3
    truths = [t for t in map(sr_ground_truth, objs) if t is not None]
    # the sample ran with SR period 20 ms: srsENB gave I_SR 15 (offset 0)
    assert [(t.sr_period_ms, t.sr_offset_ms, t.sr_config_index, t.rnti) for t in truths] == [(20, 0, 15, 70)]
    samples = [m for o in objs for m in ue_metrics(o)]
    assert samples and {m.rnti for m in samples} == {70}
    assert all(m.dl_cqi is not None and 0 <= m.dl_cqi <= 15 for m in samples)
    assert max(m.dl_bitrate_bps or 0 for m in samples) > 1e6  # the 3.1 Mbit/s download is in there
