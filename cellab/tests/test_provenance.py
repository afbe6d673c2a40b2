"""Provenance as the rerun and the store read it: software differences with hashes first, agents compared by
role, the store's run_software rows, and a rerun refused when a file its run depended on changed."""

from __future__ import annotations

import textwrap

import pytest

from cellab.records import PlannedRun, write_json
from cellab.results import software_store
from cellab.results.provenance import comparable, software_differences
from cellab.results.store import ResultStore
from cellab.run.rerun import ChangedFiles, describe, rerun
from cellab.software import file_hash, process_record, program_record
from cellab.testkit.helpers import run_cellab

TAG_A, TAG_B = "3ec9952e3e0f9cbc", "0123456789abcdef"


def _provenance(tag: str, agent: str = "clv1-server", iperf3: str = "3.12", trace_hash: str = "a" * 64) -> dict:
    module = {"programs": {"c2tcp_cong_avoi": tag}, "sha256": (tag * 4)}
    return {"controller": {"host": "h1", "cellab": "0.1.0", "programs": {"cellab-cell": "c" * 64}},
            "agents": {agent: {"agent": agent, "role": "server", "host": "h1", "software": {
                "modules": {"c2tcp": module}, "programs": {"iperf3": {"path": "/usr/bin/iperf3", "sha256": "d" * 64,
                                                                      "version": iperf3}}}}},
            "lab": {"running": {"cellab-cell": {"path": "/x/cellab-cell", "sha256": "c" * 64}}},
            "files": {"/data/trace.down": trace_hash}, "module_objects": {"c2tcp": tag * 4}, "server_sysctls": {}}


def test_a_rebuilt_module_is_named_first_and_instances_do_not_count():
    same = software_differences(_provenance(TAG_A, "clv1-server"), _provenance(TAG_A, "clv7-server"))
    assert same == []  # another lab instance names its agents otherwise: compared by role, host and paths left out
    changed = software_differences(_provenance(TAG_A), _provenance(TAG_B, iperf3="3.16"))
    keys = [row["key"] for row in changed]
    assert keys[-1] == "agents.server.software.programs.iperf3.version", keys  # a version string after the hashes
    assert "agents.server.software.modules.c2tcp.programs.c2tcp_cong_avoi" in keys[:-1]
    assert "module_objects.c2tcp" in keys[:-1]
    summary = {"run_id": "r1", "status": "ok", "error": None, "metrics": {}, "changed_files": [],
               "software_differences": changed}
    lines = describe(summary).splitlines()
    assert lines[0].startswith("software differs in 4 place(s)"), lines
    assert TAG_A in lines[1] and TAG_B in lines[1], lines  # the changed hash first, before the results
    assert lines[-1].startswith("run r1: ok")


def test_run_software_rows_in_the_store(tmp_path):
    run = PlannedRun(index=0, run_id="r0000", repeat=0, factors={}, params={})
    store = ResultStore.create(tmp_path, "c", "name: c\n", [run])
    write_json(store.run_dir(run.run_id) / "manifest.json", {"run_id": "r0000", "provenance": _provenance(TAG_A)})
    written = software_store.save(store.db_path, run.run_id, store.run_dir(run.run_id) / "manifest.json")
    rows = software_store.load(store.db_path)["r0000"]
    assert written == len(rows) and rows["module_objects.c2tcp"] == TAG_A * 4
    assert rows == software_store.rows_of(_provenance(TAG_A, "clv9-server"))  # same software, same rows and digest
    assert software_store.rows_of(_provenance(TAG_B))[software_store.DIGEST_KEY] != rows[software_store.DIGEST_KEY]
    assert "controller.host" not in rows and not any(k.endswith(".path") for k in rows)
    other = ResultStore.create(tmp_path, "d", "name: d\n", [run])
    assert software_store.load(other.db_path) == {}  # a store without the table reads as none


def _folder_with_trace(tmp_path):
    trace = tmp_path / "trace.down"
    trace.write_text("1\n2\n3\n")
    run = PlannedRun(index=0, run_id="r0000", repeat=0, factors={}, params={"trace": str(trace)})
    store = ResultStore.create(tmp_path / "out", "c", textwrap.dedent(f"""
        name: c
        lab: virtual
        fixed: {{trace: {trace}}}
        workload: {{tool: iperf3, duration_s: 1}}
    """), [run])
    provenance = _provenance(TAG_A) | {"files": {str(trace): file_hash(trace)}}
    write_json(store.run_dir(run.run_id) / "manifest.json", {"run_id": "r0000", "provenance": provenance})
    return trace, store.run_dir(run.run_id)


def test_rerun_refuses_when_a_file_the_run_depended_on_changed(tmp_path):
    trace, run_dir = _folder_with_trace(tmp_path)
    before = file_hash(trace)
    trace.write_text("1\n2\n4\n")
    with pytest.raises(ChangedFiles) as refused:
        rerun(run_dir, tmp_path / "again")
    assert refused.value.changed == [{"path": str(trace), "then": before, "now": file_hash(trace)}]
    assert not (tmp_path / "again").exists()  # refused before anything was made
    done = run_cellab("rerun", str(run_dir), "--out", str(tmp_path / "again"))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode != 0 and str(trace) in said and "changed since it ran" in said, said
    assert "--allow-changed-files" in said and "Traceback" not in said
    trace.unlink()
    done = run_cellab("rerun", str(run_dir), "--out", str(tmp_path / "again"))
    assert done.returncode != 0 and "gone" in done.stdout + done.stderr


def test_a_process_is_named_by_the_binary_it_runs(tmp_path):
    import shutil
    import subprocess
    import time

    program = tmp_path / "sleeper"
    shutil.copy("/bin/sleep", program)
    proc = subprocess.Popen([str(program), "30"])
    try:
        time.sleep(0.2)
        first = process_record(proc.pid)
        assert first == {"path": str(program), "sha256": file_hash("/bin/sleep"), "replaced_on_disk": False}
        program.unlink()
        program.write_bytes(b"#!/bin/sh\n")  # rebuilt on disk while it runs: the record keeps what runs
        again = process_record(proc.pid)
        assert again["sha256"] == first["sha256"] and again["replaced_on_disk"] is True
    finally:
        proc.kill()
        proc.wait()
    assert process_record(proc.pid) is None
    assert program_record("/bin/sleep")["version"], "sleep --version prints coreutils' version"
    assert comparable({"controller": {"host": "x", "pid": 3, "kernel": "6.1"}}) == {"controller.kernel": "6.1"}
