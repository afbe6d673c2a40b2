"""Campaign files: validation errors name file, field and allowed values; plans are stable."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from cellab.campaign.load import load_campaign, plan
from cellab.campaign.model import run_id
from cellab.errors import InputError, InputErrors

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)

GOOD = """
name: buffers
lab: wired
repeat: 2
order: {mode: randomized, seed: 7}
factors:
  cc: [cubic, bbr]
  buffer_bytes: [30000, 150000]
fixed: {rate_mbit: 20}
workload: {duration_s: 3}
"""


def write(tmp_path: Path, text: str, name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def test_plan_is_matrix_times_repeat_with_stable_ids(tmp_path):
    path = write(tmp_path, GOOD)
    runs = plan(load_campaign(path), path)
    assert len(runs) == 8
    assert len({r.run_id for r in runs}) == 8
    again = plan(load_campaign(path), path)
    assert [r.run_id for r in runs] == [r.run_id for r in again]  # same seed, same order
    for r in runs:
        assert r.run_id == run_id(r.factors, r.repeat)
        assert r.params["rate_mbit"] == 20.0 and r.params["cc"] == r.factors["cc"]


def test_randomized_order_depends_on_seed(tmp_path):
    a = plan(load_campaign(write(tmp_path, GOOD, "a.yaml")))
    b = plan(load_campaign(write(tmp_path, GOOD.replace("seed: 7", "seed: 8"), "b.yaml")))
    assert sorted(r.run_id for r in a) == sorted(r.run_id for r in b)
    assert [r.run_id for r in a] != [r.run_id for r in b]


def test_sequential_order_is_factor_order(tmp_path):
    path = write(tmp_path, GOOD.replace("randomized", "sequential"))
    runs = plan(load_campaign(path))
    assert [r.repeat for r in runs] == [0, 0, 0, 0, 1, 1, 1, 1]


@pytest.mark.parametrize(
    "change, field, fragment",
    [
        ("factors: {ccc: [cubic]}", "factors.ccc", "allowed: buffer_bytes, cc, faults, module_params, rate_mbit"),
        ("factors: {cc: [cubik]}", "factors.cc[0]", "allowed: cubic, reno, bbr"),
        ("factors: {cc: []}", "factors.cc", "empty list"),
        ("factors: {buffer_bytes: [big]}", "factors.buffer_bytes[0]", "valid integer"),
        ("repeat: 0", "repeat", "greater than or equal to 1"),
        ("order: {mode: shuffled}", "order.mode", "allowed: sequential, randomized"),
        ("workload: {duration_s: -1}", "workload.duration_s", "greater than 0"),
        ("colour: blue", "colour", "unknown key 'colour' (allowed: between_runs, comparisons, description, factors, faults"),
        ("workload: {tool: probe, sr_probes: 10, sr_probes_max: 0}", "workload.sr_probes_max", "greater than or equal"),
        ("workload: {tool: probe, sr_probes: 10, sr_probes_max: 5}", "workload.sr_probes_max", "5 is below"),
        ("workload: {tool: probe, sr_probes_max: 5}", "workload.sr_probes_max", "needs workload.sr_probes"),
        ("workload: {tool: probe, duration_s: 50, sr_probes: 10, sr_probes_max: 200}\ntimeouts: {run_s: 90}",
         "workload.sr_probes_max", "200 pings take up to 60 s, which with the 50 s workload does not fit "
                                   "timeouts.run_s 90"),
        ("workload: {sr_probes_max: 40}", "workload", "sr_probes needs tool: probe"),
    ],
)
def test_bad_campaign_names_field_and_allowed_values(tmp_path, change, field, fragment):
    path = write(tmp_path, f"name: bad\nlab: wired\n{change}\n")
    with pytest.raises((InputError, InputErrors)) as info:
        load_campaign(path)
    text = str(info.value)
    assert text.startswith(f"{path}: {field}: "), text
    assert fragment in text


def test_bad_yaml_says_where(tmp_path):
    path = write(tmp_path, "name: x\nfactors: {cc: [cubic}\n")
    with pytest.raises(InputError, match=r"bad YAML: line 2, column \d+"):
        load_campaign(path)


def test_unknown_lab_lists_choices(tmp_path):
    path = write(tmp_path, "name: x\nlab: moonbase\n")
    with pytest.raises(InputError, match=r"lab: unknown lab 'moonbase' \(allowed: .*virtual.*wired"):
        load_campaign(path)


@pytest.mark.parametrize("text", ["factors: {cc: [cubik]}", "name: [", "repeat: lots"])
def test_cli_gives_one_line_without_traceback(tmp_path, text):
    path = write(tmp_path, f"name: bad\nlab: wired\n{text}\n" if not text.startswith("name") else text)
    result = subprocess.run([sys.executable, "-m", "cellab", "validate", str(path)], capture_output=True, text=True)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr + result.stdout
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0], result.stderr


def test_cli_plan_prints_matrix(tmp_path):
    path = write(tmp_path, GOOD)
    result = subprocess.run([sys.executable, "-m", "cellab", "plan", str(path)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert "8 runs on wired" in result.stdout
    for rid in (r.run_id for r in plan(load_campaign(path))):
        assert rid in result.stdout


def test_receiver_control_needs_the_probe_workload(tmp_path):
    path = write(tmp_path, "name: r\nlab: wired\nfactors: {receiver: [none, exll]}\n")
    with pytest.raises(InputErrors, match=r"workload.tool: receiver control .* \(allowed: probe\)"):
        load_campaign(path)


BUNDLES = """
name: bundles
lab: virtual
factors:
  scheme:
    cubic: {cc: cubic}
    exll-rx: {cc: cubic, receiver: exll}
  channel:
    static: {schedule: static}
    mobile: {schedule: walk}
schedules:
  walk: {file: walk.yaml}
fixed: {n_prb: 50}
workload: {tool: probe, duration_s: 3}
"""


WALK = "segments: [{kind: ramp, from_db: 10, to_db: 40, duration_s: 5}]\n"


def test_bundle_factors_set_their_parameters_and_label_the_run(tmp_path):
    (tmp_path / "walk.yaml").write_text(WALK)
    runs = plan(load_campaign(write(tmp_path, BUNDLES)))
    assert len(runs) == 4
    by_label = {(r.factors["scheme"], r.factors["channel"]): r.params for r in runs}
    assert by_label[("exll-rx", "mobile")]["receiver"] == "exll"
    assert by_label[("exll-rx", "mobile")]["schedule"] == "walk"
    assert by_label[("cubic", "static")]["receiver"] == "none"
    assert all(p["n_prb"] == 50 for p in by_label.values())


@pytest.mark.parametrize("change, field, fragment", [
    ("    mobile: {schedule: walk}", "factors.channel.mobile.schedule", "unknown schedule 'run' (allowed: static, walk)"),
    ("    exll-rx: {cc: cubic, receiver: exll}", "factors.scheme.exll-rx.rcv", "unknown parameter"),
    ("    cubic: {cc: cubic}", "factors.scheme.cubic.cc", "allowed: cubic, reno, bbr"),
])
def test_bad_bundle_names_its_level(tmp_path, change, field, fragment):
    replacement = {"    mobile: {schedule: walk}": "    mobile: {schedule: run}",
                   "    exll-rx: {cc: cubic, receiver: exll}": "    exll-rx: {cc: cubic, rcv: exll}",
                   "    cubic: {cc: cubic}": "    cubic: {cc: cubik}"}[change]
    (tmp_path / "walk.yaml").write_text(WALK)
    path = write(tmp_path, BUNDLES.replace(change, replacement))
    with pytest.raises((InputError, InputErrors)) as info:
        load_campaign(path)
    assert f"{field}: " in str(info.value) and fragment in str(info.value), str(info.value)


def test_a_bundle_may_not_be_named_like_a_parameter(tmp_path):
    path = write(tmp_path, "name: b\nlab: virtual\nfactors:\n  cc: {fast: {cc: bbr}}\n")
    with pytest.raises(InputErrors, match=r"factors.cc: a bundle factor's name is a label"):
        load_campaign(path)


def test_files_are_resolved_against_the_campaign_file(tmp_path):
    sub = tmp_path / "camp"
    sub.mkdir()
    (sub / "t.down").write_text("1\n2\n")
    (sub / "data").mkdir()
    (sub / "data" / "drive.csv").write_text("t_s,rsrp_dbm\n0,-80\n1,-90\n")  # validate reads the drive log
    text = ("name: f\nlab: virtual\nfactors:\n  network:\n    commercial: {trace: t.down}\n    lab: {schedule: drive}\n"
            "schedules:\n  drive: {drive_log: data/drive.csv}\n")
    campaign = load_campaign(write(sub, text))
    assert campaign.factors["network"]["commercial"]["trace"] == str(sub / "t.down")
    assert campaign.schedules["drive"].drive_log == str(sub / "data" / "drive.csv")
    missing = write(sub, text.replace("t.down", "gone.down"), "m.yaml")
    with pytest.raises(InputErrors, match=r"factors.network.commercial.trace: .*does not exist"):
        load_campaign(missing)


@pytest.mark.parametrize("workload, fragment", [
    ("{tool: iperf3, size_bytes: 1000}", "size_bytes needs tool: probe"),
    ("{tool: probe, kind: upload}", "the probe workload is a download"),
    ("{tool: probe, flows: 2, size_bytes: [1000]}", "size_bytes: one value per flow (2)"),
    ("{tool: probe, sr_probes: 999}", "less than or equal to 256"),
])
def test_bad_probe_workload(tmp_path, workload, fragment):
    path = write(tmp_path, f"name: w\nlab: virtual\nworkload: {workload}\n")
    with pytest.raises((InputError, InputErrors)) as info:
        load_campaign(path)
    assert "workload" in str(info.value) and fragment in str(info.value), str(info.value)


def test_schedule_needs_exactly_one_source(tmp_path):
    path = write(tmp_path, "name: s\nlab: virtual\nschedules: {x: {file: a.yaml, drive_log: b.csv}}\n")
    with pytest.raises((InputError, InputErrors), match=r"schedules.x: .*exactly one of file or drive_log"):
        load_campaign(path)


@pytest.mark.parametrize("name", ["sr-validation", "cc-shootout", "mobility-replay", "lab-vs-commercial",
                                  "demo/sr-validation", "demo/cc-shootout"])
def test_example_campaigns_validate(name):
    root = Path(__file__).resolve().parents[2] / "runs"
    if name in ("mobility-replay", "lab-vs-commercial") and not (root / "data" / "sample-drive.csv").exists():
        from cellab.campaign.traces import write_samples
        write_samples(root / "data")
    runs = plan(load_campaign(root / f"{name}.yaml"))
    assert runs and all(r.params["cc"] for r in runs)


@pytest.mark.parametrize("lab, schedule, field, fragment", [
    ("wired", "segments: [{kind: hold, db: 10, duration_s: 1}]", "schedules.walk",
     "lab wired has no attenuator in front of its UE"),
    ("virtual", "segments: [{kind: hold, db: 10, duration_s: 1}, {kind: hold, db: 99, duration_s: 1}]",
     "schedules.walk.file", "segment 2 (hold).db: 99.0 dB at t=1.0 s is outside the safety limits [0.0, 95.0] dB"),
    ("virtual", "channels: [2]\nsegments: [{kind: hold, db: 10, duration_s: 1}]", "fixed.schedule",  # issue 40
     "schedule 'walk' moves channel 2 (its file's channels), but the campaign's UEs are #0 on channel 1"),
    ("virtual", "channels: [17]\nsegments: [{kind: hold, db: 10, duration_s: 1}]", "schedules.walk.file",
     "no channel 17 on this attenuator"),
])
def test_schedule_files_are_checked_against_the_labs_attenuator(tmp_path, lab, schedule, field, fragment):
    (tmp_path / "walk.yaml").write_text(schedule + "\n")
    path = write(tmp_path, f"name: s\nlab: {lab}\nfixed: {{schedule: walk}}\nschedules: {{walk: {{file: walk.yaml}}}}\n")
    with pytest.raises(InputErrors) as info:
        load_campaign(path)
    assert f"{field}: " in str(info.value) and fragment in str(info.value), str(info.value)
