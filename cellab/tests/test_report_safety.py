"""`cellab report` on hostile or damaged result folders (issue 27): output is created, never followed through a
symbolic link; database columns of the wrong type, broken JSON and numbers beyond range end in an error naming
the file, run and column; so do metrics the report cannot draw (a number that is text, a series that is no list:
issue 42, the report is not drawn from a damaged store); a folder that contradicts itself is refused; and a fuzz
test damages a small folder's rows and files at random: the report renders or raises CellabError."""

from __future__ import annotations

import json
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, assume, event, given, settings
from hypothesis import strategies as st

from cellab.errors import CellabError, InputError
from cellab.records import PlannedRun
from cellab.report import figures as report_figures
from cellab.report import page as report
from cellab.results.store import ResultStore
from cellab.safepath import SafeDir, UnsafePathError
from cellab.testkit.fuzzing import json_values, raw
from cellab.tests.test_bad_input import cellab, refused
from cellab.tests.test_report import make_folder

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)


def small_folder(tmp_path: Path) -> Path:
    """Three runs (one failed), a timeline each, two UEs on the first, a manifest per finished run."""
    campaign = {"name": "small", "lab": "virtual", "factors": {"cc": ["cubic", "bbr"]}, "fixed": {"n_prb": 25},
                "workload": {"tool": "probe", "sr_probes": 4}}
    planned = [PlannedRun(index=i, run_id=f"r{i}", repeat=i // 2, factors={"cc": cc}, params={"cc": cc})
               for i, cc in enumerate(["cubic", "bbr", "cubic"])]
    store = ResultStore.create(tmp_path, "small", yaml.safe_dump(campaign), planned)
    for run in planned:
        store.start(run)
        if run.index == 2:
            store.finish(run, "failed", error="boom")
            continue
        metrics = {"throughput_bps": 5e6 + run.index, "rtt_p95_ms": 40.0, "rtt_series_ms": [30.0, 40.0, 50.0],
                   "sr_estimate_ms": 20, "sr_true_ms": 20, "sr_regime": "sr-limited",
                   "timeline": {"throughput_bps": {"t_s": [0, 1, 2], "v": [4e6, 5e6, 6e6]},
                                "rtt_ms": {"t_s": [0, 1], "v": [30, 50]}}}
        ues = {"ue0": {"throughput_bps": 2e6}, "ue1": {"throughput_bps": 3e6}} if run.index == 0 else None
        store.finish(run, "ok", metrics=metrics, ue_metrics=ues)
        (store.run_dir(run.run_id) / "manifest.json").write_text(json.dumps({"run_id": run.run_id}))
    return store.root


def execute(folder: Path, sql: str, *args: object) -> None:
    with closing(sqlite3.connect(folder / "results.sqlite")) as db, db:
        db.execute("PRAGMA ignore_check_constraints = ON")
        db.execute(sql, args)


# --- output paths ------------------------------------------------------------------------------------
def test_a_symlinked_report_folder_is_refused_and_its_target_untouched(capsys, tmp_path):
    folder = small_folder(tmp_path / "out")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "precious.png").write_bytes(b"keep me")
    (folder / "report").symlink_to(elsewhere)
    with pytest.raises(UnsafePathError, match="report is a symbolic link"):
        report.write_report(folder)
    assert sorted(p.name for p in elsewhere.iterdir()) == ["precious.png"]
    assert not (folder / "report.html").exists()
    refused(capsys, ["report", str(folder)], str(folder / "report"), "symbolic link", "remove the link")
    assert (elsewhere / "precious.png").read_bytes() == b"keep me"


@pytest.mark.parametrize("name", ["report.html", "report/summary.json", "report/comparisons.json"])
def test_a_symlinked_output_file_is_refused(tmp_path, name):
    folder = small_folder(tmp_path / "out")
    (folder / "report").mkdir()
    target = tmp_path / "victim.txt"
    target.write_text("untouched")
    (folder / name).symlink_to(target)
    with pytest.raises(UnsafePathError, match=f"{name.split('/')[-1]} is a symbolic link"):
        report.write_report(folder)
    assert target.read_text() == "untouched"
    assert not [p for p in (folder / "report").iterdir() if p.suffix in (".png", ".svg")]


def test_old_figures_that_are_links_are_unlinked_not_followed(tmp_path):
    folder = small_folder(tmp_path / "out")
    (folder / "report").mkdir()
    target = tmp_path / "victim.png"
    target.write_bytes(b"untouched")
    (folder / "report" / "old.png").symlink_to(target)
    report.write_report(folder)
    assert not (folder / "report" / "old.png").is_symlink() and target.read_bytes() == b"untouched"


def test_safedir_refuses_links_and_odd_names(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    (tmp_path / "file").write_text("x")
    with SafeDir.open(tmp_path) as out:
        with pytest.raises(UnsafePathError, match="symbolic link"):
            out.subdir("link")
        with pytest.raises(UnsafePathError, match="a file, not a folder"):
            out.subdir("file")
        with pytest.raises(UnsafePathError, match="one path component"):
            out.write("../escape", "x")
        with pytest.raises(UnsafePathError, match="a folder, not a file"):
            out.write("real", "x")
        path = out.write("new.txt", "hello")
        assert path.read_text() == "hello" and not [n for n in out.names() if n.endswith(".tmp")]


# --- damaged databases -------------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "says"), [
    ("[1, 2]", "a JSON list, not an object"),
    ('{"throughput_bps": ', "not JSON"),
    ('{"throughput_bps": 1e999}', "throughput_bps: inf is beyond range"),
    ('{"rtt_series_ms": [1.0, 2e300]}', "rtt_series_ms[1]: 2e+300 is beyond range"),
    ('{"retransmits": 123456789012345678901234567890}', "retransmits: 123456789012345678901234567890 does not fit"),
    ('{"x": NaN}', "NaN is not a finite number"),
    ('{"throughput_bps": 1' + "0" * 400 + "}", "throughput_bps: 1000"),  # 10^400 as an integer
    ('{"throughput_bps": 1e400}', "throughput_bps: inf is beyond range"),
])
def test_unreadable_metrics_are_refused_naming_the_run(tmp_path, value, says):
    folder = small_folder(tmp_path)
    execute(folder, "UPDATE runs SET metrics = ? WHERE run_id = 'r1'", value)
    with pytest.raises(CellabError) as err:
        report.write_report(folder)
    assert "results.sqlite: runs.r1.metrics" in str(err.value) and says in str(err.value), str(err.value)
    assert "not drawn from a damaged store" in str(err.value) and not (folder / "report.html").exists()


@pytest.mark.parametrize(("metrics", "says"), [
    ({"throughput_bps": "fast"}, "runs.r1.metrics.throughput_bps: is 'fast', not a number"),
    ({"rtt_p95_ms": True}, "runs.r1.metrics.rtt_p95_ms: is True, not a number"),
    ({"rtt_series_ms": {"a": 1}}, "runs.r1.metrics.rtt_series_ms: is {'a': 1}, not a list of numbers"),
    ({"sr_regime": 7}, "runs.r1.metrics.sr_regime: is 7, not text"),
    ({"timeline": {"throughput_bps": {"t_s": [0, "x", 2], "v": [1e6, 2e6, None]}}},
     "runs.r1.metrics.timeline.throughput_bps: is"),
    ({"timeline": {"rtt_ms": [1, 2]}}, "runs.r1.metrics.timeline.rtt_ms: is [1, 2]"),
    ({"timeline": {"rtt_ms": {"t_s": [0, 1], "v": [1]}}}, "timeline.rtt_ms: has 2 times and 1 values"),
    ({"ack_gap_ms": ["a", None, 3.0]}, "runs.r1.metrics.ack_gap_ms: is ['a', None, 3.0], not a list of numbers"),
    ({"owd_p95_ms": "12"}, "runs.r1.metrics.owd_p95_ms: is '12', not a number"),
])
def test_metrics_of_the_wrong_type_are_refused_by_name(tmp_path, metrics, says):
    folder = small_folder(tmp_path)
    execute(folder, "UPDATE runs SET metrics = ? WHERE run_id = 'r1'", json.dumps(metrics))
    with pytest.raises(InputError) as err:
        report.write_report(folder)
    assert str(folder / "results.sqlite") in str(err.value) and says in str(err.value), str(err.value)
    assert not (folder / "report.html").exists()


def test_a_ue_row_of_the_wrong_type_is_refused_by_name(tmp_path):
    folder = small_folder(tmp_path)
    execute(folder, "UPDATE ue_runs SET metrics = ? WHERE ue = 'ue1'", '{"throughput_bps": [1]}')
    with pytest.raises(InputError, match=r"ue_runs\.r0\.ue1\.metrics\.throughput_bps: is \[1\], not a number"):
        report.write_report(folder)


@pytest.mark.parametrize(("sql", "args", "says"), [
    ("UPDATE runs SET factors = ? WHERE run_id = 'r1'", ('{"cc": ',), "runs.r1.factors: not JSON"),
    ("UPDATE runs SET factors = ? WHERE run_id = 'r1'", ("[1]",), "runs.r1: its index, repeat or factors differ"),
    ("UPDATE runs SET idx = ? WHERE run_id = 'r1'", ("one",), "runs.r1.idx: 'one' is not an integer"),
    ("UPDATE runs SET status = ? WHERE run_id = 'r1'", ("exploded",), "runs.r1.status: 'exploded' is no run status"),
    ("UPDATE runs SET status = ? WHERE run_id = 'r1'", (b"\xff\xfe",), "runs.r1.status: not UTF-8 text (byte offset 0)"),
    ("UPDATE runs SET metrics = ? WHERE run_id = 'r1'", (3,), "runs.r1.metrics: a JSON int, not an object"),
    ("UPDATE runs SET run_id = ? WHERE run_id = 'r1'", ("../../etc",), "'../../etc' is not a run id"),
    ("INSERT INTO runs (run_id, idx, repeat, factors, status) VALUES (?, 9, 0, '{}', 'ok')", ("ghost",),
     "runs.ghost: run ghost is in the database but not in plan.json"),
    ("DELETE FROM runs WHERE run_id = ?", ("r2",), "plan.json plans 1 run(s) the database lacks (r2)"),
    ("INSERT INTO ue_runs (run_id, ue, slot, metrics) VALUES (?, 'x', 0, NULL)", ("nobody",),
     "ue_runs.nobody: a UE row of a run the database lacks"),
])
def test_a_damaged_or_contradictory_database_is_named(tmp_path, sql, args, says):
    folder = small_folder(tmp_path)
    if "DELETE FROM runs" in sql:
        execute(folder, "DELETE FROM ue_runs WHERE run_id = ?", *args)
    execute(folder, sql, *args)
    with pytest.raises(CellabError) as err:
        report.write_report(folder)
    assert str(folder / "results.sqlite") in str(err.value) and says in str(err.value), str(err.value)
    assert not (folder / "report.html").exists()


def test_a_manifest_naming_another_run_is_refused(tmp_path):
    folder = small_folder(tmp_path)
    (folder / "runs" / "r1" / "manifest.json").write_text(json.dumps({"run_id": "r0"}))
    with pytest.raises(InputError, match="the manifest names run 'r0', its folder is run r1"):
        report.write_report(folder)


def test_a_plan_with_a_path_for_a_run_id_is_refused(tmp_path):
    folder = make_folder(tmp_path, {"cc": ["cubic"]}, [({"cc": "cubic"}, "ok", {"throughput_bps": 1.0})])
    plan = json.loads((folder / "plan.json").read_text())
    plan[0]["run_id"] = "../x"
    (folder / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(InputError, match=r"plan.json: \[0\].run_id: '../x' is not a run id"):
        report.write_report(folder)


# --- fuzz ----------------------------------------------------------------------------------------------
COLUMNS = ["run_id", "idx", "repeat", "factors", "status", "error", "metrics"]
METRIC_NAMES = ["throughput_bps", "rtt_p95_ms", "rtt_series_ms", "throughput_series_bps", "sr_estimate_ms",
                "sr_true_ms", "sr_regime", "timeline", "ues", "ue_fairness_jain", "rtt_source", "ack_gap_ms"]
timeline_values = st.dictionaries(st.sampled_from(["throughput_bps", "rtt_ms", "cqi.ue0", "attenuation_db", "x"]),
                                  st.one_of(json_values, st.fixed_dictionaries(
                                      {"t_s": st.lists(json_values, max_size=6), "v": st.lists(json_values, max_size=6)})),
                                  max_size=4)
metrics_values = st.dictionaries(st.sampled_from(METRIC_NAMES), st.one_of(json_values, timeline_values), max_size=6)
sql_values = st.one_of(
    st.none(), st.integers(min_value=-2**63, max_value=2**63 - 1), st.floats(), st.text(max_size=20),
    st.binary(max_size=20), json_values.map(json.dumps), metrics_values.map(json.dumps),
    st.sampled_from(["r0", "r1", "r2", "ok", "failed", '{"cc": "bbr"}', "1e999", '{"a": 1e400}', "[" * 100]))
readable_damage = st.one_of(  # metrics that parse but hold anything: the report must render them
    st.tuples(st.just("runs"), st.just("metrics"), st.integers(1, 3), metrics_values.map(json.dumps)),
    st.tuples(st.just("ue_runs"), st.just("metrics"), st.integers(1, 2), metrics_values.map(json.dumps)),
)
damage = st.one_of(
    readable_damage, readable_damage, readable_damage,
    st.tuples(st.just("runs"), st.sampled_from(COLUMNS), st.integers(1, 3), sql_values),
    st.tuples(st.just("ue_runs"), st.sampled_from(["run_id", "ue", "slot", "metrics"]), st.integers(1, 2), sql_values),
    st.tuples(st.just("insert"), st.sampled_from(["r0", "r9", "x/y"]), st.integers(0, 9), sql_values),
    st.tuples(st.just("plan.json"), st.sampled_from(["drop", "rename", "raw", "value"]), st.integers(0, 2),
              st.one_of(raw, json_values)),
    st.tuples(st.just("manifest"), st.sampled_from(["r0", "r1"]), st.integers(0, 1), st.one_of(raw, json_values)),
    st.tuples(st.just("campaign"), st.sampled_from(["factors", "fixed", "workload", "name", "raw"]), st.integers(0, 1),
              st.one_of(raw, json_values)),
)


def apply(folder: Path, what: str, name: str, n: int, value: object) -> None:
    if what in ("runs", "ue_runs"):
        execute(folder, f"UPDATE {what} SET {name} = ? WHERE rowid = ?", value, n)
    elif what == "insert":
        execute(folder, "INSERT INTO runs (run_id, idx, repeat, factors, status, metrics) VALUES (?, ?, 0, ?, 'ok', ?)",
                name, n, '{"cc": "cubic"}', value if isinstance(value, str | bytes) or value is None else str(value))
    elif what == "plan.json":
        try:
            plan = json.loads((folder / "plan.json").read_text())
            plan[n]["run_id"]  # noqa: B018 - an earlier damage may have left no such run
        except Exception:  # noqa: BLE001 - an earlier damage broke the file: overwrite it
            plan, name = [], "raw"
        if name == "drop":
            del plan[n]
        elif name == "rename":
            plan[n]["run_id"] = "r9"
        elif name == "value":
            plan[n]["factors"] = value.decode("latin-1") if isinstance(value, bytes) else value
        path_value = value if name == "raw" else json.dumps(plan)
        (folder / "plan.json").write_bytes(path_value if isinstance(path_value, bytes) else str(path_value).encode())
    elif what == "manifest":
        data = value if isinstance(value, bytes) else json.dumps(value).encode()
        (folder / "runs" / name / "manifest.json").write_bytes(data)
    else:
        try:
            campaign = yaml.safe_load((folder / "campaign.yaml").read_text())
            campaign[name] = value
        except Exception:  # noqa: BLE001 - an earlier damage broke the file: overwrite it
            name = "raw"
        text = value if name == "raw" else yaml.safe_dump(campaign).encode()
        (folder / "campaign.yaml").write_bytes(text if isinstance(text, bytes) else str(text).encode())


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    return small_folder(tmp_path_factory.mktemp("pristine"))


@settings(max_examples=150, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(damages=st.lists(damage, min_size=1, max_size=3))
def test_fuzzed_folders_render_or_raise_cellab_error(pristine, tmp_path_factory, monkeypatch, damages):
    # drawing is the figure module's (an undrawable figure becomes a note there); the fuzz is about reading
    monkeypatch.setattr(report_figures, "render_all", lambda jobs, workers=None: [(b"png", b"svg")] * len(jobs))
    folder = tmp_path_factory.mktemp("fuzz") / "folder"
    shutil.copytree(pristine, folder)
    for what, name, n, value in damages:
        try:
            apply(folder, what, name, n, value)
        except (sqlite3.IntegrityError, OverflowError):
            assume(False)  # the database's own constraints refused the damage
    try:
        path = report.write_report(folder)
    except CellabError:
        event("refused")
        return
    event("rendered")
    assert path.read_text().startswith("<!doctype html>")
    json.loads((folder / "report" / "summary.json").read_text())
    json.loads((folder / "report" / "comparisons.json").read_text())


def test_the_pristine_folder_renders_for_real(capsys, pristine, tmp_path):
    folder = tmp_path / "copy"
    shutil.copytree(pristine, folder)
    code, text = cellab(capsys, "report", str(folder))
    assert code == 0, text
    html = (folder / "report.html").read_text()
    assert {"sr", "conditions", "comparisons", "runs", "ues", "timelines"} <= set(
        __import__("re").findall(r'<section id="([^"]+)"', html))


# each example draws every figure (about 1 s): 8 examples of 2..3 damages draw about as many damaged metrics
# (20) as the 12 of 1..3 did (24), over both classes (a run's row, a UE's row), in two thirds of the time
@settings(max_examples=8, deadline=None, database=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(damages=st.lists(readable_damage, min_size=2, max_size=3))
def test_fuzzed_metrics_are_refused_or_drawn_without_a_failed_figure(pristine, tmp_path_factory, damages):
    folder = tmp_path_factory.mktemp("draw") / "folder"
    shutil.copytree(pristine, folder)
    for what, name, n, value in damages:
        apply(folder, what, name, n, value)
    try:
        html = report.write_report(folder, workers=1).read_text()
    except CellabError as exc:
        assert "not drawn from a damaged store" in str(exc) and not (folder / "report.html").exists()
        return
    assert 'class="missing"' not in html, html[html.index('class="missing"'):][:400]
