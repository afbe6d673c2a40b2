"""cellab.results.frames and `cellab export`: a result folder as typed DataFrames that match the store, the report's
headline numbers recomputed from them, Parquet that reads back the same, and bad input refused with nothing
written (a folder that is not a campaign, a store of a newer schema, an export onto a file or through a link)."""

from __future__ import annotations

import json
import os
import sqlite3
from contextlib import closing

import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from scipy import stats

from cellab.errors import CellabError, InputError
from cellab.report import page as report
from cellab.results.export import export
from cellab.results.frames import load, unit_of
from cellab.results.ratios import ratio_of_medians
from cellab.safepath import UnsafePathError
from cellab.tests.test_report import full_metrics, make_folder

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)


def shootout(tmp_path, repeats: int = 3):
    rng = np.random.default_rng(4)
    factors = {"scheme": {"cubic": {"cc": "cubic"}, "c2tcp": {"cc": "c2tcp"}, "bbr": {"cc": "bbr"}},
               "channel": ["static", "mobile"], "ues": [1]}
    runs = []
    for scheme, rate, delay in (("cubic", 10, 60), ("c2tcp", 9.8, 20), ("bbr", 6, 15)):
        for channel in factors["channel"]:
            for _ in range(repeats):
                m = full_metrics(rng, rate, delay, points=40)
                m.pop("sr_estimate_ms")
                m["ues"] = 1  # a metric named like a factor
                runs.append(({"scheme": scheme, "channel": channel, "ues": 1}, "ok", m))
    runs.append(({"scheme": "bbr", "channel": "mobile", "ues": 1}, "failed", None))
    return make_folder(tmp_path, factors, runs, fixed={"n_prb": 25})


def sr_campaign(tmp_path):
    runs = []
    for true_ms in (10, 20, 40):
        for i in range(4):
            estimate = true_ms if i else (None if true_ms == 40 else 2 * true_ms)
            m = full_metrics(np.random.default_rng(true_ms + i), 5, 30, sr_true_ms=true_ms, sr_estimate_ms=estimate,
                             points=10)
            runs.append(({"sr_period_ms": true_ms}, "ok", m))
    folder = make_folder(tmp_path, {"sr_period_ms": [10, 20, 40]}, runs)
    return folder


def store_metrics(folder) -> dict[str, dict]:
    with closing(sqlite3.connect(folder / "results.sqlite")) as db:
        return {run_id: json.loads(m) if m else None for run_id, m in db.execute("SELECT run_id, metrics FROM runs")}


def test_runs_and_timelines_match_the_store(tmp_path):
    folder = shootout(tmp_path)
    results = load(folder)
    runs, timelines = results.runs(), results.timelines()
    stored = store_metrics(folder)
    assert len(runs) == len(stored) == 19 and set(runs.run_id) == set(stored)
    assert runs.valid.sum() == 18 and runs.loc[~runs.valid, "status"].tolist() == ["failed"]
    assert str(runs.idx.dtype) == "Int64" and str(runs.scheme.dtype) == "string"
    assert runs.throughput_bps.dtype == np.float64 and str(runs.retransmits.dtype) == "Int64"
    assert str(runs.channel.dtype) == "string" and str(runs.ues.dtype) == "Int64"
    assert "metric:ues" in runs.columns  # the metric named like the factor keeps its own column
    for run_id, metrics in stored.items():
        row = runs.set_index("run_id").loc[run_id]
        if metrics is None:
            assert pd.isna(row.throughput_bps)
            continue
        assert row.throughput_bps == metrics["throughput_bps"] and row.rtt_p95_ms == metrics["rtt_p95_ms"]
        for series, data in metrics["timeline"].items():
            mine = timelines[(timelines.run_id == run_id) & (timelines.series == series)]
            assert mine.t_s.tolist() == data["t_s"] and mine.value.tolist() == data["v"]
            assert set(mine.unit) == {unit_of(series)}
    assert len(timelines) == sum(len(d["t_s"]) for m in stored.values() if m for d in m["timeline"].values())
    assert timelines.drop_duplicates("series").unit.value_counts().to_dict() == {"bit/s": 2, "dB": 1, "ms": 1}
    units = results.units
    assert units["throughput_bps"] == "bit/s" and units["rtt_p95_ms"] == "ms" and units["t_s"] == "s"
    assert units["retransmits"] == "segments" and units["fct_mean_s"] == "s" and units["scheme"] == ""
    assert unit_of("bytes_received") == "bytes" and unit_of("rsrp_dbm.ue0") == "dBm"


def test_the_shootout_headline_is_recomputed_from_the_dataframes(tmp_path):
    folder = shootout(tmp_path)
    report.write_report(folder, workers=1)
    saved = json.loads((folder / "report" / "comparisons.json").read_text())["headline"]
    assert saved["kind"] == "shoot-out" and saved["numbers"]["baseline"] == "cubic"
    html = (folder / "report.html").read_text()
    assert html.index('<p class="headline"><b>Best on p95 delay at cubic') < html.index("<nav>")  # it opens the page
    runs = load(folder).runs()
    ok = runs[runs.valid]
    medians = ok.groupby("scheme").throughput_bps.median()
    for scheme in ("c2tcp", "bbr"):
        theirs = saved["numbers"]["schemes"][scheme]
        assert theirs["throughput_ratio"]["ratio"] == pytest.approx(medians[scheme] / medians["cubic"])
        mine = ratio_of_medians(ok[ok.scheme == "cubic"].rtt_p95_ms, ok[ok.scheme == scheme].rtt_p95_ms)
        assert (theirs["rtt_p95_ratio"]["low"], theirs["rtt_p95_ratio"]["high"]) == pytest.approx((mine.low, mine.high))
    # c2tcp keeps cubic's throughput (its interval reaches 1) at a third of the delay; bbr loses 40 % of it
    assert saved["numbers"]["best"] == "c2tcp"
    assert saved["numbers"]["schemes"]["bbr"]["throughput_ratio"]["high"] < 1
    assert "1 failed of 19 runs not counted" in saved["lines"][-1]
    comparisons = load(folder).comparisons()
    row = comparisons[(comparisons.level == "c2tcp") & (comparisons.metric == "throughput_bps")].iloc[0]
    assert row.ratio == pytest.approx(medians["c2tcp"] / medians["cubic"]) and row.unit == "bit/s"


def test_the_sr_headline_is_recomputed_from_the_dataframes(tmp_path):
    folder = sr_campaign(tmp_path)
    report.write_report(folder, workers=1)
    saved = json.loads((folder / "report" / "comparisons.json").read_text())["headline"]
    runs = load(folder).runs()
    ok = runs[runs.valid]
    right = int((ok.sr_estimate_ms == ok.sr_true_ms).fillna(False).sum())
    interval = stats.binomtest(right, len(ok)).proportion_ci(method="wilson")
    assert (saved["numbers"]["correct"], saved["numbers"]["runs"]) == (right, len(ok)) == (9, 12)
    assert (saved["numbers"]["wilson_low"], saved["numbers"]["wilson_high"]) == pytest.approx((interval.low,
                                                                                               interval.high))
    assert saved["lines"][0] == "SR period estimated right in 9 of 12 runs (75 %, 95 % Wilson interval 47 %–91 %)."
    assert saved["lines"][1] == "Right per true period: 10 ms 3/4, 20 ms 3/4, 40 ms 3/4."


def test_export_parquet_reads_back_the_same_and_never_overwrites(tmp_path):
    folder = shootout(tmp_path / "campaign", repeats=2)
    results = load(folder)
    out = tmp_path / "export"
    written = export(folder, out, "parquet")
    assert sorted(p.name for p in written) == ["columns.parquet", "comparisons.parquet", "runs.parquet",
                                               "timelines.parquet", "ue_runs.parquet"]
    table = pq.read_table(out / "runs.parquet")
    runs = results.runs()
    assert table.num_rows == len(runs) and table.column_names == list(runs.columns)
    types = {f.name: str(f.type) for f in table.schema}
    assert (types["run_id"], types["idx"], types["valid"], types["throughput_bps"], types["retransmits"]) == (
        "string", "int64", "bool", "double", "int64")
    assert types["started_at"].startswith("timestamp") and "UTC" in types["started_at"]
    assert table.schema.field("throughput_bps").metadata == {b"unit": b"bit/s"}
    back = table.to_pandas()
    assert back.run_id.tolist() == runs.run_id.tolist()
    assert np.allclose(back.throughput_bps, runs.throughput_bps, equal_nan=True)
    timelines = pq.read_table(out / "timelines.parquet")
    assert timelines.num_rows == len(results.timelines()) and str(timelines.schema.field("t_s").type) == "double"
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(UnsafePathError, match="runs.parquet exists: cellab export never overwrites"):
        export(folder, out, "parquet")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_export_refuses_a_link_and_writes_nothing(tmp_path):
    folder = shootout(tmp_path / "campaign", repeats=2)
    out, elsewhere = tmp_path / "export", tmp_path / "precious.csv"
    out.mkdir()
    elsewhere.write_text("keep me")
    os.symlink(elsewhere, out / "timelines.csv")
    with pytest.raises(UnsafePathError, match="timelines.csv is a symbolic link"):
        export(folder, out, "csv")
    assert elsewhere.read_text() == "keep me" and sorted(os.listdir(out)) == ["timelines.csv"]
    with pytest.raises(CellabError, match="not an export format"):
        export(folder, tmp_path / "x", "xlsx")
    assert not (tmp_path / "x").exists()
    written = export(folder, tmp_path / "csv", "csv")
    runs = pd.read_csv(tmp_path / "csv" / "runs.csv")
    assert len(runs) == len(load(folder).runs()) and {p.name for p in written} >= {"columns.csv", "runs.csv"}
    columns = pd.read_csv(tmp_path / "csv" / "columns.csv")
    assert columns[(columns.table == "runs") & (columns.column == "rtt_p95_ms")].unit.tolist() == ["ms"]


def test_bad_folders_are_refused_naming_the_file(tmp_path):
    with pytest.raises(CellabError, match="not a campaign result folder"):
        load(tmp_path)
    folder = shootout(tmp_path / "campaign", repeats=1)
    with closing(sqlite3.connect(folder / "results.sqlite")) as db:
        db.execute("PRAGMA user_version = 99")
    with pytest.raises(InputError, match=r"results.sqlite: user_version: store schema 99 .*newer cellab"):
        load(folder)
    with pytest.raises(InputError, match="newer cellab"):
        export(folder, tmp_path / "out", "parquet")
    assert not (tmp_path / "out").exists()


def test_a_damaged_timeline_series_is_left_out_with_a_note(tmp_path):
    metrics = {"throughput_bps": 1e6, "timeline": {"rtt_ms": {"t_s": [0, 1], "v": [5.0]},
                                                   "throughput_bps": {"t_s": [0, 1], "v": [1e6, 2e6]}}}
    folder = make_folder(tmp_path, {"cc": ["cubic"]}, [({"cc": "cubic"}, "ok", metrics)])
    results = load(folder)
    assert results.timelines().series.tolist() == ["throughput_bps", "throughput_bps"]
    assert results.notes == ["run r000: timeline series 'rtt_ms' is not {t_s: [...], v: [...]} of equal length: "
                             "left out"]
    assert results.comparisons().empty and "no comparisons" in results.notes[-1]
