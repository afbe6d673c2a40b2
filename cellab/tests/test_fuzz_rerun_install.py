"""The project's fuzzers, grown to two surfaces of issue 42: `cellab rerun` reading a run's manifest (its
provenance, hashes and run id damaged at random) and `cellab agent install` taking its arguments (one replaced by
a hostile value). Every outcome is the CLI's own: refused with a message (exit 1 or 2), or for a rerun reaching
the lab (stopped here by a stand-in), for an install a unit written under --root only, whose every line is one
setting (no injected line or section). Never a traceback, nothing written outside the test's folder."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cellab.bus.testing import make_keys
from cellab.errors import CellabError
from cellab.software import file_hash
from cellab.testkit.fuzzing import json_values, raw
from cellab.tests.test_agent_install_paths import ME
from cellab.tests.test_fuzz_cli import _Hang, _run
from cellab.tests.test_report_safety import small_folder

pytestmark = pytest.mark.background  # no clock, no root needed by what is refused

FUZZ = settings(max_examples=60, deadline=None, database=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


class _ReachedTheLab(CellabError):
    """The rerun got past every check of its record: the lab would start now."""


def _ended_cleanly(result, shown: str) -> None:
    assert not isinstance(result.exception, _Hang), f"{shown}: no end"
    if result.exception is not None and not isinstance(result.exception, SystemExit | CellabError):
        raise AssertionError(f"{shown}: {type(result.exception).__name__}: {result.exception}") from result.exception
    assert result.exit_code in (0, 1, 2) and "Traceback" not in result.output, (shown, result.output[-800:])


# --- rerun manifests ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def campaign(tmp_path_factory) -> Path:
    folder = small_folder(tmp_path_factory.mktemp("rerun"))
    dependency = folder.parent / "trace.down"
    dependency.write_text("1\n2\n")
    os.mkfifo(folder.parent / "fifo")  # a file a hash would wait on for ever
    manifest = {"run_id": "r0", "provenance": {"files": {str(dependency): "0" * 64}}, "lab": {"kind": "virtual"}}
    (folder / "runs" / "r0" / "manifest.json").write_text(json.dumps(manifest))
    return folder


paths = st.one_of(st.sampled_from(["", "/", "/dev/zero", "/dev/null", "\x00", "/" + "x" * 5000, "{trace}",
                                   "/nonexistent", "..", "relative/file", "{fifo}"]), st.text(max_size=30))
hashes = st.one_of(st.sampled_from(["", "0" * 64, "z" * 64, "0" * 63, "{hash}"]), json_values)
files = st.one_of(st.dictionaries(paths, hashes, min_size=1, max_size=3), json_values)
provenance = st.one_of(st.fixed_dictionaries({"files": files}, optional={"software": json_values}), json_values)
records = st.fixed_dictionaries({"run_id": st.just("r0")},
                                optional={"provenance": provenance, "lab": json_values, "software": json_values})
manifests = st.one_of(records, records, records, st.fixed_dictionaries({"run_id": json_values}), json_values,
                      raw)  # mostly a record of this run, whose provenance is what is damaged


@FUZZ
@given(manifest=manifests, seq=st.integers(0, 10**9))
def test_rerun_of_a_fuzzed_manifest_ends_cleanly(campaign, tmp_path_factory, monkeypatch, manifest, seq):
    from cellab.run import runner

    monkeypatch.setattr(runner.Runner, "run", lambda self: (_ for _ in ()).throw(_ReachedTheLab("lab")))
    folder = tmp_path_factory.mktemp("copy") / campaign.name
    shutil.copytree(campaign, folder)
    text = manifest if isinstance(manifest, bytes) else json.dumps(manifest).encode()
    for name, value in (("{trace}", campaign.parent / "trace.down"), ("{fifo}", campaign.parent / "fifo"),
                        ("{hash}", file_hash(campaign.parent / "trace.down"))):
        text = text.replace(name.encode(), str(value).encode())
    (folder / "runs" / "r0" / "manifest.json").write_bytes(text)
    out = folder.parent / f"out-{seq}"
    result = _run(["rerun", str(folder / "runs" / "r0"), "--out", str(out), "--allow-changed-files"],
                  str(folder.parent))
    _ended_cleanly(result, f"rerun of {text[:120]!r}")


# --- agent install arguments ------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    return make_keys(tmp_path_factory.mktemp("keys"), ["atten1"])


OPTIONS = ["--role", "--name", "--controller", "--key", "--controller-key", "--kind", "--telemetry", "--netns",
           "--artifact-dir", "--cell-ctl", "--cell-ue", "--serial", "--adb-port", "--srsran-bin", "--env", "--user",
           "--cellab"]
hostile = st.one_of(
    st.sampled_from(["", "\x00", "a\nb", "x\n[Service]\nExecStartPre=/bin/sh -c id", "ok\rExecStart=/bin/true",
                     "tcp://", "tcp://127.0.0.1:99999", "tcp://1.2.3.4:7700\nUser=root", "$(id)", "`id`", "%n", "%%",
                     "../../etc", "/", "/dev/zero", "-1", "1e400", "nan", "root", "x" * 5000, "A=B\nC=D",
                     "LD_PRELOAD=/tmp/x.so", "=", "PATH=", " ", "\\", "'", '"', ";", "|", "{key}"]),
    st.text(max_size=30))


@FUZZ
@given(option=st.sampled_from(OPTIONS), value=hostile, seq=st.integers(0, 10**9))
def test_agent_install_with_one_hostile_argument_ends_cleanly(keys, tmp_path_factory, option, value, seq):
    tmp = tmp_path_factory.mktemp("install")
    root = tmp / "root"
    args = {"--role": "attenuator", "--name": "atten1", "--controller": "tcp://192.0.2.1:7700",
            "--key": str(keys.agents["atten1"][1]), "--controller-key": str(keys.controller_public),
            "--user": ME, "--root": str(root)}
    args[option] = value.replace("{key}", str(keys.agents["atten1"][0]))
    argv = ["agent", "install"] + [w for k, v in args.items() for w in (k, v)]
    before = set(os.listdir(tmp))
    result = _run(argv, str(tmp))
    shown = f"agent install {option} {value[:60]!r}"
    _ended_cleanly(result, shown)
    assert set(os.listdir(tmp)) <= before | {"root"}, shown  # nothing beside --root
    units = list(root.rglob("*.service")) if root.exists() else []
    if result.exit_code != 0:
        assert not units, shown
        return
    for unit in units:
        assert unit.parent == root / "etc" / "systemd" / "system", shown
        for line in unit.read_text().splitlines():  # one setting a line: nothing injected
            assert line == "" or line.startswith(("#", "[Unit]", "[Service]", "[Install]")) or (
                "=" in line and line.split("=", 1)[0].isidentifier()), (shown, line)
        sections = [line for line in unit.read_text().splitlines() if line.startswith("[")]
        assert sections == ["[Unit]", "[Service]", "[Install]"], (shown, sections)
