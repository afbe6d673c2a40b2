"""A corpus of bad inputs, one per class of issue 17 and more, each through the command line: exit code 2,
no traceback, one message naming the file and the field. Also the key folder's modes."""

from __future__ import annotations

import hashlib
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from cellab.bus.keys import generate_keypair
from cellab.testkit.helpers import cellab_in_process

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)

CAMPAIGN = "name: c\nlab: virtual\nfactors: {cc: [cubic]}\nworkload: {duration_s: 10}\n"


def cellab(capsys, *args: str) -> tuple[int, str]:
    """Run the CLI in this process (as `cellab ARGS`); (exit code, stdout + stderr)."""
    code, out, err = cellab_in_process(capsys, *args)
    return code, out + err


def refused(capsys, args: list[str], *fragments: str) -> str:
    code, text = cellab(capsys, *args)
    assert code == 2, text
    assert "Traceback" not in text, text
    flat = " ".join(text.split())  # rich may wrap long lines
    for fragment in fragments:
        assert fragment in flat, f"{fragment!r} not in {flat!r}"
    return flat


def write(path: Path, text: str | bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


def campaign(tmp_path: Path, text: str, name: str = "c.yaml") -> str:
    return str(write(tmp_path / name, text))


# ------------------------------------------------------------------ campaign files
BOMB = ("name: c\nlab: virtual\nx0: &a0 [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]\n"
        + "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9))
        + "factors: {cc: *a8}\n")

CAMPAIGN_CASES = {
    "not-utf8": (b"name: c\nlab: virtual\ndescription: \xff\xfe\n", ["c.yaml", "not UTF-8", "byte offset 34"]),
    "deep-nesting": ("name: c\nfixed: " + "[" * 5000 + "]" * 5000 + "\n", ["c.yaml", "line 2", "nested deeper"]),
    "alias-bomb": (BOMB, ["c.yaml", "aliases"]),
    "duplicate-key": ("name: c\nlab: virtual\nname: d\n", ["c.yaml", "line 3", "duplicate key 'name'"]),
    "inf": ("name: c\nlab: virtual\nfixed: {core_delay_ms: .inf}\n", ["c.yaml", "fixed.core_delay_ms", "finite"]),
    "1e308": ("name: c\nlab: virtual\nfixed: {attenuation_db: 1e308}\n", ["c.yaml", "fixed.attenuation_db", "too large"]),
    "ul_prb>n_prb": ("name: c\nlab: virtual\nfixed: {ul_prb: 50}\nfactors: {n_prb: [25]}\n",
                     ["c.yaml", "fixed.ul_prb", "ul_prb (50) exceeds n_prb (25)"]),
    "ul_prb>n_prb-in-one-run": ("name: c\nlab: virtual\nfixed: {n_prb: 15}\nfactors: {ul_prb: [10, 20]}\n",
                                ["c.yaml", "run ul_prb=20", "ul_prb (20) exceeds n_prb (15)"]),
    "huge-matrix": ("name: c\nlab: virtual\nrepeat: 1000\nfactors: {attenuation_db: ["
                    + ", ".join(str(v / 2) for v in range(191)) + "]}\n",
                    ["c.yaml", "factors", "191000 runs", "up to 100000 runs"]),
    "attenuation-above-bridge": ("name: c\nlab: virtual\nfixed: {attenuation_db: 150}\n",
                                 ["c.yaml", "fixed.attenuation_db", "95"]),
    "run_s-shorter": (CAMPAIGN + "timeouts: {run_s: 5}\n", ["c.yaml", "timeouts.run_s", "workload (10 s)"]),
    "seed-2^63": ("name: c\nlab: virtual\norder: {mode: randomized, seed: 9223372036854775808}\n",
                  ["c.yaml", "order.seed"]),
    "seed-2^64": ("name: c\nlab: virtual\norder: {seed: 18446744073709551616}\n", ["c.yaml", "64 bits"]),
    "bad-date": ("name: c\nlab: virtual\ndescription: 2020-13-45\n", ["c.yaml", "month must be in 1..12"]),
    "two-documents": ("name: c\n---\nname: d\n", ["c.yaml", "line 2"]),
    "control-char": ("name: c\x1f\n", ["c.yaml", "bad YAML"]),
    "garbage-trace": ("name: c\nlab: virtual\nfixed: {trace: t.down}\n", ["c.yaml", "fixed.trace", "t.down", "line 1"]),
    "trace-backwards": ("name: c\nlab: virtual\nfixed: {trace: back.down}\n",
                        ["c.yaml", "fixed.trace", "back.down", "nondecreasing"]),
    "drive-log-unordered": ("name: c\nlab: virtual\nfixed: {schedule: d}\nschedules: {d: {drive_log: drive.csv}}\n",
                            ["c.yaml", "schedules.d.drive_log", "drive.csv", "time goes back"]),
    "drive-log-short-row": ("name: c\nlab: virtual\nfixed: {schedule: d}\nschedules: {d: {drive_log: short.csv}}\n",
                            ["c.yaml", "schedules.d.drive_log", "short.csv: row 3", "1 columns"]),
    "calibration-order": ("name: c\nlab: virtual\nfixed: {schedule: d}\n"
                          "schedules: {d: {drive_log: ok.csv, calibration: order.json}}\n",
                          ["c.yaml", "schedules.d.calibration", "order.json", "min_db (80.0) must be below max_db"]),
    "calibration-zero-slope": ("name: c\nlab: virtual\nfixed: {schedule: d}\n"
                               "schedules: {d: {drive_log: ok.csv, calibration: flat.json}}\n",
                               ["c.yaml", "schedules.d.calibration", "flat.json", "b_db_per_db"]),
    "schedule-channel": ("name: c\nlab: virtual\nfixed: {schedule: d}\n"
                         "schedules: {d: {drive_log: ok.csv, calibration: good.json, channel: 30}}\n",
                         ["c.yaml", "schedules.d.channel", "16 channels"]),
    "schedule-bomb": ("name: c\nlab: virtual\nfixed: {schedule: s}\nschedules: {s: {file: bomb.yaml}}\n",
                      ["c.yaml", "schedules.s.file", "bomb.yaml", "aliases"]),
}


def _calibration(min_db: float = 0, max_db: float = 80, slope: float = 1.0) -> str:
    return (f'{{"shield_box": "b", "ue": "u", "earfcn": 1, "a_dbm": -40, "b_db_per_db": {slope}, '
            f'"residual_rms_db": 0.1, "max_residual_db": 0.2, "min_db": {min_db}, "max_db": {max_db}}}')


@pytest.fixture
def data_files(tmp_path: Path) -> Path:
    write(tmp_path / "t.down", "hello\n")
    write(tmp_path / "back.down", "5\n3\n")
    write(tmp_path / "drive.csv", "t_s,rsrp_dbm\n1,-80\n0,-80\n")
    write(tmp_path / "short.csv", "t_s,rsrp_dbm\n0,-80\n1\n")
    write(tmp_path / "ok.csv", "t_s,rsrp_dbm\n0,-80\n1,-90\n")
    write(tmp_path / "order.json", _calibration(min_db=80, max_db=10))
    write(tmp_path / "flat.json", _calibration(slope=0))
    write(tmp_path / "good.json", _calibration())
    bomb = ("x0: &a0 [{kind: hold, db: 10, duration_s: 1}]\n"
            + "".join(f"x{i}: &a{i} [{', '.join([f'*a{i - 1}'] * 10)}]\n" for i in range(1, 9)) + "segments: *a8\n")
    write(tmp_path / "bomb.yaml", bomb)
    return tmp_path


@pytest.mark.parametrize("case", sorted(CAMPAIGN_CASES))
@pytest.mark.parametrize("command", ["validate", "plan"])
def test_bad_campaign_is_refused_by_name(capsys, data_files, case, command):
    text, fragments = CAMPAIGN_CASES[case]
    refused(capsys, [command, campaign(data_files, text)], *fragments)


def test_the_corpus_is_fine_without_its_defect(capsys, data_files):
    """The same files with the defect taken out pass: the corpus fails for the reason it names."""
    code, text = cellab(capsys, "validate", campaign(data_files, CAMPAIGN))
    assert code == 0, text
    good = ("name: c\nlab: virtual\nfixed: {schedule: d}\n"
            "schedules: {d: {drive_log: ok.csv, calibration: good.json, channel: 1}}\n")
    code, text = cellab(capsys, "validate", campaign(data_files, good))
    assert code == 0, text


@pytest.mark.parametrize("path, fragment", [("/dev/zero", "character device"), ("/", "folder")])
def test_a_file_that_is_not_a_file(capsys, path, fragment):
    refused(capsys, ["validate", path], path, fragment)


def test_a_fifo_does_not_hang(tmp_path):
    fifo = tmp_path / "c.yaml"
    os.mkfifo(fifo)
    done = subprocess.run([sys.executable, "-m", "cellab", "validate", str(fifo)], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "c.yaml" in done.stderr and "FIFO" in done.stderr


def test_a_large_campaign_is_refused_at_once(capsys, tmp_path):
    text = "name: c\ndescription: " + "x" * (50 << 20) + "\n"
    refused(capsys, ["validate", campaign(tmp_path, text)], "c.yaml", "larger than")


# ------------------------------------------------------------------ inventories
def inventory(tmp_path: Path, **change: object) -> str:
    for name in ("controller", "server1", "ue1", "atten1"):
        if not (tmp_path / "keys" / f"{name}.key").exists():
            generate_keypair(tmp_path / "keys", name)
    lab = {
        "name": "lab", "controller": {"secret_key": "keys/controller.key_secret"},
        "hosts": [{"name": "edge", "address": "10.0.0.1"}, {"name": "bench", "address": "10.0.0.2"}],
        "agents": [{"name": "server1", "role": "server", "host": "edge", "public_key": "keys/server1.key"},
                   {"name": "ue1", "role": "ue", "host": "bench", "public_key": "keys/ue1.key"},
                   {"name": "atten1", "role": "attenuator", "host": "bench", "public_key": "keys/atten1.key"}],
        "devices": {"servers": [{"name": "edge", "agent": "server1", "address": "10.0.0.1"}],
                    "ues": [{"name": "phone", "kind": "virtual", "agent": "ue1",
                             "attenuator": {"attenuator": "box1", "channel": 3}}],
                    "attenuators": [{"name": "box1", "model": "minicircuits-rc4dat", "transport": "http",
                                     "address": "http://127.0.0.1:1", "channels": 4, "max_db": 60,
                                     "agent": "atten1"}]},
    }
    for dotted, value in change.items():
        target = lab
        *parents, last = dotted.split("__")
        for part in parents:
            target = target[int(part)] if isinstance(target, list) else target[part]
        if value is None:
            del target[int(last) if isinstance(target, list) else last]
        elif isinstance(target, list):
            target[int(last)] = value
        else:
            target[last] = value
    return str(write(tmp_path / "lab.yaml", yaml.safe_dump(lab)))


def test_a_good_inventory_passes(capsys, tmp_path):
    code, text = cellab(capsys, "validate", inventory(tmp_path))
    assert code == 0, text


def test_inventory_channel_beyond_the_box(capsys, tmp_path):
    path = inventory(tmp_path, devices__ues__0__attenuator={"attenuator": "box1", "channel": 9})
    refused(capsys, ["validate", path], "lab.yaml", "channel 9 exceeds")


def test_inventory_duplicate_agent_names(capsys, tmp_path):
    dup = {"name": "server1", "role": "ue", "host": "bench", "public_key": "keys/ue1.key"}
    refused(capsys, ["validate", inventory(tmp_path, agents__1=dup)], "lab.yaml", "agents", "'server1' appears more")


def test_inventory_duplicate_host_names(capsys, tmp_path):
    refused(capsys, ["validate", inventory(tmp_path, hosts__1={"name": "edge", "address": "10.0.0.3"})],
            "lab.yaml", "hosts", "'edge' appears more")


def test_inventory_public_key_that_is_not_a_curve_key(capsys, tmp_path):
    path = inventory(tmp_path)
    write(tmp_path / "keys" / "ue1.key", "metadata\ncurve\n    public-key = \"not-a-key\"\n")
    refused(capsys, ["validate", path], "lab.yaml", "agents.ue1.public_key", "ue1.key", "not a CURVE key")
    write(tmp_path / "keys" / "ue1.key", "any readable file\n")
    refused(capsys, ["validate", path], "lab.yaml", "agents.ue1.public_key", "no public-key line")


def test_inventory_max_db_inf(capsys, tmp_path):
    path = inventory(tmp_path)
    Path(path).write_text(Path(path).read_text().replace("max_db: 60", "max_db: .inf"))
    refused(capsys, ["validate", path], "lab.yaml", "max_db", "not a finite number")


def test_an_empty_inventory(capsys, tmp_path):
    path = inventory(tmp_path, agents=[], devices={})
    refused(capsys, ["validate", path], "lab.yaml", "agents and devices")


def test_schedule_on_a_ue_without_an_attenuator_channel(capsys, tmp_path):
    inventory(tmp_path, devices__ues__0__attenuator=None)
    write(tmp_path / "s.yaml", "segments: [{kind: hold, db: 10, duration_s: 1}]\n")
    text = "name: c\nlab: lab.yaml\nfixed: {schedule: s}\nschedules: {s: {file: s.yaml}}\n"
    refused(capsys, ["validate", campaign(tmp_path, text)], "c.yaml", "schedules.s", "no attenuator")


# ------------------------------------------------------------------ schedules, traces, run folders, keys
def test_schedule_alias_bomb_and_duplicate_keys(capsys, data_files):
    config = write(data_files / "atten.yaml", "name: a\nmodel: minicircuits-rcdat\ntransport: serial\nmax_db: 90\n")
    refused(capsys, ["atten", "check", str(data_files / "bomb.yaml"), "--config", str(config)], "bomb.yaml", "aliases")
    write(data_files / "dup.yaml", "segments: [{kind: hold, db: 10, duration_s: 1}]\nclip: true\nclip: false\n")
    refused(capsys, ["atten", "check", str(data_files / "dup.yaml"), "--config", str(config)], "dup.yaml", "line 3")


@pytest.mark.parametrize("log, fragments", [
    ("ms,flow,bytes\n0,0,1500\n1,0\n", ["p.csv", "row 3", "2 columns"]),
    ("ms,flow,bytes\n0,0,inf\n", ["p.csv", "row 2.bytes", "finite"]),
    ("ms,flow,bytes\n1e400,0,1500\n", ["p.csv", "row 2.ms", "finite"]),
    ("t_ns,flow,dir,seq,ack,len\n99999999999999999999999,0,0,0,0,100\n", ["p.csv", "row 2.t_ns", "out of range"]),
    (b"ms,flow,bytes\n0,0,\xff\n", ["p.csv", "not UTF-8"]),
])
def test_bad_probe_log(capsys, tmp_path, log, fragments):
    path = write(tmp_path / "p.csv", log)
    refused(capsys, ["trace", "from-probe", str(path), "--out", str(tmp_path / "t.down")], *fragments)


def test_trace_out_that_cannot_be_written(capsys, tmp_path):
    path = write(tmp_path / "p.csv", "ms,flow,bytes\n0,0,1500\n10,0,1500\n")
    blocker = write(tmp_path / "file", "x")
    refused(capsys, ["trace", "from-probe", str(path), "--out", str(blocker / "t.down")], "t.down", "--out")


def run_folder(tmp_path: Path) -> Path:
    """A finished campaign folder, written by the store itself."""
    from cellab.campaign.load import load_campaign, plan
    from cellab.results.store import ResultStore

    path = campaign(tmp_path, CAMPAIGN)
    runs = plan(load_campaign(path), path)
    store = ResultStore.create(tmp_path / "out", "c", CAMPAIGN, runs)
    store.start(runs[0])
    store.finish(runs[0], "ok", metrics={"throughput_mbps": 1.0})
    return store.root


def _hashes(folder: Path) -> dict[str, str]:
    return {str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(folder.rglob("*")) if p.is_file() and not p.name.endswith(("-wal", "-shm"))}


@pytest.mark.parametrize("damage, name, fragment", [
    ("results.sqlite", b"SQLite format 3\0" + b"\x07" * 4000, "corrupt database"),
    ("results.sqlite", b"not a database at all", "not a SQLite database"),
    ("campaign.yaml", b"name: [unclosed\n", "bad YAML"),
    ("campaign.yaml", b"\xff\xfe", "not UTF-8"),
    ("plan.json", b"[{\"index\": 0}", "bad JSON"),
])
@pytest.mark.parametrize("command", ["report", "resume"])
def test_corrupt_run_folder_is_named_and_left_alone(capsys, tmp_path, damage, name, fragment, command):
    root = run_folder(tmp_path)
    code, text = cellab(capsys, "report", str(root))
    assert code == 0, text  # sound before the damage
    (root / damage).write_bytes(name)
    before = _hashes(root)
    args = ["report", str(root)] if command == "report" else ["run", "--resume", str(root)]
    refused(capsys, args, damage, fragment)
    assert _hashes(root) == before


def test_keys_dir_naming_a_file(capsys, tmp_path):
    blocker = write(tmp_path / "f", "x")
    refused(capsys, ["keys", "ctl", "--dir", str(blocker)], str(blocker), "--dir", "not a folder")
    assert blocker.read_text() == "x"


# ------------------------------------------------------------------ key folder modes
def test_an_existing_key_folder_keeps_its_mode(capsys, tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o1777)  # like /tmp
    code, text = cellab(capsys, "keys", "ctl", "--dir", str(shared))
    assert code == 0, text
    assert stat.S_IMODE(shared.stat().st_mode) == 0o1777
    assert "warning" in text and "writable by others" in " ".join(text.split())
    assert stat.S_IMODE((shared / "ctl.key_secret").stat().st_mode) == 0o600
    private = tmp_path / "private"
    private.mkdir(mode=0o750)
    os.chmod(private, 0o750)
    code, text = cellab(capsys, "keys", "ctl", "--dir", str(private))
    assert code == 0 and "warning" not in text
    assert stat.S_IMODE(private.stat().st_mode) == 0o750


def test_a_new_key_folder_is_0700_and_secrets_0600(capsys, tmp_path):
    folder = tmp_path / "a" / "keys"
    old = os.umask(0o022)
    try:
        code, text = cellab(capsys, "keys", "agent1", "--dir", str(folder))
    finally:
        os.umask(old)
    assert code == 0, text
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE((folder / "agent1.key_secret").stat().st_mode) == 0o600
    assert stat.S_IMODE((folder / "agent1.key").stat().st_mode) == 0o644



def test_an_unknown_module_parameter_is_refused_at_validate(capsys, tmp_path):
    # the names and ranges come from this host's server-module loader (build/bin/cellab-modules, `make setup`)
    path = campaign(tmp_path, "name: x\nlab: wired\nfixed: {module_params: {c2tcp: {target: 30}}}\n")
    refused(capsys, ["validate", path], "fixed.module_params.c2tcp.target: unknown parameter", "target_ms")
    path = campaign(tmp_path, "name: x\nlab: wired\nfactors: {module_params: [{c2tcp: {target_ms: 30000}}]}\n")
    refused(capsys, ["validate", path], "factors.module_params[0].c2tcp.target_ms: 30000 is out of range",
            "0..10000 ms")


@pytest.mark.parametrize("text", ["?\n", "? x\n", "name: x\n? [1]\n: 2\n", "name: x\nfactors: {? y: [1]}\n"])
def test_a_yaml_key_that_is_no_string(capsys, tmp_path, text):
    # found by the readers' fuzzing: `? x` makes a key of no string type (None, a list); it was a TypeError
    path = campaign(tmp_path, text)
    code, out = cellab(capsys, "validate", path)
    assert code == 2 and "Traceback" not in out and path in " ".join(out.split()), out
