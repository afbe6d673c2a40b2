"""A small shoot-out on the virtual lab (root, 4 runs of 3 s), its results loaded with cellab.results.frames: row
counts, columns and units match the store, the report's headline numbers are recomputed from the DataFrames,
`cellab run` ends with the headline, and `cellab export` to Parquet reads back with pyarrow as the same rows
and types."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from contextlib import closing
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from cellab.results.frames import load
from cellab.results.ratios import ratio_of_medians
from cellab.results.software_store import summary as software_summary

CAMPAIGN = """
name: frames-shootout
lab: virtual
repeat: 2
factors:
  scheme:
    cubic: {cc: cubic}
    bbr: {cc: bbr}
fixed: {n_prb: 25, core_delay_ms: 10, attenuation_db: 20, rlc_queue: 4194304}
workload: {tool: probe, duration_s: 3}
measurements: [throughput, rtt]
timeouts: {run_s: 60, request_s: 20}
retry: {max_attempts: 2, backoff_s: 1}
"""


def cellab(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "cellab", *args], capture_output=True, text=True, timeout=600)


def test_a_virtual_lab_shootout_loads_exports_and_ends_with_its_headline(require_root, netns_prefix, tmp_path):
    campaign = tmp_path / "campaign.yaml"
    campaign.write_text(CAMPAIGN)
    done = cellab("run", str(campaign), "--out", str(tmp_path / "out"), "--prefix", netns_prefix)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (folder,) = (tmp_path / "out").iterdir()
    headline = json.loads((folder / "report" / "comparisons.json").read_text())["headline"]
    last = done.stdout.strip().splitlines()[-len(headline["lines"]):]
    assert [line.removeprefix("frames-shootout: ") for line in last] == headline["lines"]  # `cellab run` ends so

    results = load(folder)
    runs, timelines = results.runs(), results.timelines()
    with closing(sqlite3.connect(folder / "results.sqlite")) as db:
        stored = {run_id: json.loads(m) for run_id, m in db.execute("SELECT run_id, metrics FROM runs")}
    assert len(runs) == len(stored) == 4 and runs.valid.all() and sorted(runs.scheme) == ["bbr", "bbr", "cubic", "cubic"]
    scalars = {name for m in stored.values() for name, v in m.items() if not isinstance(v, list | dict)}
    assert scalars <= set(runs.columns) and {"scheme", "placement_lab", "software_digest", "started_at"} <= set(runs.columns)
    assert set(runs.placement_lab) == {"virtual"} and runs.software_digest.notna().all()
    # one definition of "the same software": the table's digest is the store's run_software digest
    assert runs.set_index("run_id").software_digest.to_dict() == software_summary(folder / "results.sqlite")
    for run_id, metrics in stored.items():
        assert runs.set_index("run_id").loc[run_id, "throughput_bps"] == metrics["throughput_bps"]
        for series, data in metrics["timeline"].items():
            assert (timelines[(timelines.run_id == run_id) & (timelines.series == series)].value.tolist()
                    == [float(v) for v in data["v"]])
    assert len(timelines) == sum(len(d["v"]) for m in stored.values() for d in m["timeline"].values())
    units = dict(timelines.drop_duplicates("series")[["series", "unit"]].itertuples(index=False))
    assert units["throughput_bps"] == "bit/s" and units["rtt_ms"] == "ms" and units["capacity_bps"] == "bit/s"
    assert results.units["rtt_p95_ms"] == "ms" and results.units["throughput_bps"] == "bit/s"

    # the headline's numbers, recomputed from the DataFrames
    bbr = headline["numbers"]["schemes"]["bbr"]
    for metric, key in (("throughput_bps", "throughput_ratio"), ("rtt_p95_ms", "rtt_p95_ratio")):
        mine = ratio_of_medians(runs[runs.scheme == "cubic"][metric], runs[runs.scheme == "bbr"][metric])
        assert (bbr[key]["ratio"], bbr[key]["low"], bbr[key]["high"]) == pytest.approx((mine.ratio, mine.low, mine.high))
    comparisons = results.comparisons()
    assert set(comparisons.metric) >= {"throughput_bps", "rtt_p95_ms"} and set(comparisons.level) == {"bbr"}

    exported = cellab("export", str(folder), "--format", "parquet", "--out", str(tmp_path / "export"))
    assert exported.returncode == 0, exported.stderr
    table = pq.read_table(tmp_path / "export" / "runs.parquet")
    assert table.num_rows == 4 and table.column_names == list(runs.columns)
    types = {f.name: str(f.type) for f in table.schema}
    assert (types["throughput_bps"], types["valid"], types["idx"], types["scheme"]) == ("double", "bool", "int64",
                                                                                          "string")
    assert pq.read_table(tmp_path / "export" / "timelines.parquet").num_rows == len(timelines)
    again = cellab("export", str(folder), "--format", "parquet", "--out", str(tmp_path / "export"))
    assert again.returncode == 2 and "never overwrites" in again.stderr
    assert not list(Path(tmp_path / "export").glob(".*.tmp"))
