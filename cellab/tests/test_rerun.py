"""`cellab rerun` of a virtual-cell run: the same configuration, results within the campaign's own run-to-run
spread, a manifest equal to the original's except for time and host state, and the provenance that made it
repeatable (commit, programs, files by hash, sysctls)."""

from __future__ import annotations

import json
import textwrap

from cellab.results.provenance import _is_hash
from cellab.run.rerun import manifest_differences
from cellab.testkit.helpers import only_folder, result_rows, run_cellab


def test_rerun_repeats_a_virtual_run_within_its_spread(require_root, netns_prefix, tmp_path):
    campaign = tmp_path / "c.yaml"
    campaign.write_text(textwrap.dedent("""
        name: again
        lab: virtual
        repeat: 2  # the spread of two runs: a tighter bound than three give, never a looser one
        fixed: {n_prb: 15, core_delay_ms: 10, seed: 4}
        workload: {tool: iperf3, duration_s: 2, ping_interval_ms: 100}
        timeouts: {run_s: 60, request_s: 15}
        retry: {max_attempts: 2, backoff_s: 0.2, max_late_tti_fraction: null}  # what is tested is the rerun
    """))
    done = run_cellab("run", str(campaign), "--out", str(tmp_path / "out"), "--prefix", netns_prefix, "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    folder = only_folder(tmp_path / "out")
    rows = result_rows(folder)
    run_id = rows[0][0]
    throughputs = [json.loads((folder / "runs" / r[0] / "metrics.json").read_text())["throughput_bps"] for r in rows]
    spread = max(throughputs) - min(throughputs)
    manifest = json.loads((folder / "runs" / run_id / "manifest.json").read_text())
    provenance = manifest["provenance"]
    assert len(provenance["controller"]["programs"]["cellab-cell"]) == 64 and provenance["module_objects"] == {}
    assert provenance["server_sysctls"]["net.ipv4.tcp_congestion_control"]
    assert manifest["software"]["cellab"] and "kernel" in manifest["software"]
    # the cell's binary as its process ran it: the build's hash, read through /proc/PID/exe
    running = provenance["lab"]["running"]["cellab-cell"]
    assert running["sha256"] == provenance["controller"]["programs"]["cellab-cell"], provenance["lab"]
    assert running["replaced_on_disk"] is False
    roles = sorted(a["role"] for a in provenance["agents"].values())
    assert roles == ["attenuator", "server", "ue"], provenance["agents"]
    ue = next(a for a in provenance["agents"].values() if a["role"] == "ue")
    assert ue["software"]["programs"]["cellab-probe"]["sha256"] == provenance["controller"]["programs"]["cellab-probe"]
    assert ue["cellab"] and ue["kernel"]

    again = run_cellab("rerun", str(folder / "runs" / run_id), "--out", str(tmp_path / "again"),
                       "--prefix", netns_prefix)
    assert again.returncode == 0, again.stdout + again.stderr
    new = only_folder(tmp_path / "again")
    summary = json.loads((new / "rerun.json").read_text())
    assert summary["status"] == "ok" and summary["manifest_differences"] == [], summary
    assert summary["software_differences"] == [] and "software: the same" in again.stdout, summary
    row = summary["metrics"]["throughput_bps"]
    assert abs(row["rerun"] - row["original"]) <= max(2 * spread, 0.05 * row["original"]), (row, throughputs)
    new_manifest = json.loads((new / "runs" / run_id / "manifest.json").read_text())
    assert new_manifest["provenance"]["controller"]["programs"] == provenance["controller"]["programs"]
    assert "throughput_bps" in again.stdout and "ratio" in again.stdout


def test_manifest_differences_ignore_time_and_host_state_only():
    a = {"run_id": "x", "params": {"cc": "cubic"}, "started_at": 1.0, "lab": {"kind": "virtual", "server": 1}}
    b = {"run_id": "x", "params": {"cc": "cubic"}, "started_at": 2.0, "lab": {"kind": "virtual", "server": 2}}
    assert manifest_differences(a, b) == []
    assert manifest_differences(a, b | {"params": {"cc": "bbr"}}) == ["params"]
    assert manifest_differences(a, b | {"lab": {"kind": "wired"}}) == ["lab.kind"]


def test_rerun_of_a_folder_that_is_not_a_run_is_refused(tmp_path):
    done = run_cellab("rerun", str(tmp_path), "--out", str(tmp_path / "o"))
    said = " ".join((done.stdout + done.stderr).split())
    assert done.returncode == 2 and "is not a run folder" in said and "Traceback" not in said, said


MODULE = "cubic_cap"  # a module other tests and benches seldom load: a load reuses one already registered
CHANGE = ("tp->snd_cwnd > cf->cwnd_cap_pkts", "tp->snd_cwnd >= cf->cwnd_cap_pkts")  # other instructions, other tag


def _changed_module_loader(tmp_path):
    """cellab-modules built again with the module's object changed, in a folder of its own; the repository's
    build is left as it is."""
    import shutil
    import subprocess
    from pathlib import Path

    from cellab.paths import BUILD_BIN

    root = Path(__file__).resolve().parents[2]
    objects, skels, bin_dir = tmp_path / "obj", tmp_path / "skel", tmp_path / "bin"
    for folder in (objects, skels, bin_dir):
        folder.mkdir()
    for skel in (root / "build" / "server-modules").glob("*.skel.h"):
        shutil.copy(skel, skels / skel.name)
    source = (root / "server-modules" / "bpf" / f"{MODULE}.bpf.c").read_text()
    assert CHANGE[0] in source
    (objects / f"{MODULE}.bpf.c").write_text(source.replace(*CHANGE))
    subprocess.run(["clang", "-g", "-O2", "-target", "bpf", "-D__TARGET_ARCH_x86", "-Wall", "-Werror",
                    f"-I{root / 'build' / 'server-modules'}", f"-I{root / 'server-modules' / 'bpf'}", "-c",
                    str(objects / f"{MODULE}.bpf.c"), "-o", str(objects / f"{MODULE}.bpf.o")], check=True,
                   capture_output=True)
    skel = subprocess.run(["bpftool", "gen", "skeleton", str(objects / f"{MODULE}.bpf.o"), "name", f"{MODULE}_bpf"],
                          check=True, capture_output=True).stdout
    (skels / f"{MODULE}.skel.h").write_bytes(skel)
    loader = sorted(str(p) for p in (root / "server-modules" / "loader").glob("*.c"))
    subprocess.run(["cc", "-std=c11", "-O2", "-g", "-D_GNU_SOURCE", f"-I{skels}",
                    f"-I{root / 'server-modules' / 'loader'}", *loader, "-o", str(bin_dir / "cellab-modules"),
                    "-lbpf", "-lelf", "-lz"], check=True, capture_output=True)
    for program in BUILD_BIN.iterdir():  # the rest of the build as it is: only the loader differs
        if not (bin_dir / program.name).exists():
            (bin_dir / program.name).symlink_to(program)
    return bin_dir


def _wait_unregistered(name, timeout_s=300.0):
    """Until no one on this host has the module registered (another lab's load would be reused, old object and
    all): the rerun must load the rebuilt one."""
    import subprocess
    import time

    from cellab.paths import BUILD_BIN

    deadline = time.monotonic() + timeout_s
    while True:
        listing = json.loads(subprocess.run([str(BUILD_BIN / "cellab-modules"), "list"], check=True,
                                            capture_output=True, text=True).stdout)
        module = next(m for m in listing["modules"] if m["name"] == name)
        if not (module["loaded"] or module["registered"]):
            return
        assert time.monotonic() < deadline, f"{name} stayed registered by {module['holders']} for {timeout_s} s"
        time.sleep(2.0)


def test_rerun_after_a_module_object_changed_names_its_hash_first(require_root, netns_prefix, tmp_path,
                                                                  monkeypatch):
    """A run with a BPF congestion control, then its rerun with the server module's object rebuilt with a change:
    the module's hash as the kernel holds it (read back from the loaded programs) differs, and the rerun says so
    before anything else, among the hashes (the loader's own beside it), before any version or sysctl."""
    campaign = tmp_path / "c.yaml"
    campaign.write_text(textwrap.dedent(f"""
        name: module-changed
        lab: virtual
        fixed: {{n_prb: 15, core_delay_ms: 10, cc: {MODULE}}}
        workload: {{tool: iperf3, duration_s: 2, ping_interval_ms: null}}
        timeouts: {{run_s: 60, request_s: 15}}
        retry: {{max_attempts: 2, backoff_s: 0.2, max_late_tti_fraction: null}}
    """))
    _wait_unregistered(MODULE)
    done = run_cellab("run", str(campaign), "--out", str(tmp_path / "out"), "--prefix", netns_prefix, "--no-report")
    assert done.returncode == 0, done.stdout + done.stderr
    folder = only_folder(tmp_path / "out")
    run_id = result_rows(folder)[0][0]
    before = json.loads((folder / "runs" / run_id / "manifest.json").read_text())["provenance"]
    assert len(before["module_objects"][MODULE]) == 64, before["module_objects"]

    monkeypatch.setenv("CELLAB_BIN", str(_changed_module_loader(tmp_path)))
    _wait_unregistered(MODULE)
    again = run_cellab("rerun", str(folder / "runs" / run_id), "--out", str(tmp_path / "again"),
                       "--prefix", netns_prefix)
    assert again.returncode == 0, again.stdout + again.stderr
    summary = json.loads((only_folder(tmp_path / "again") / "rerun.json").read_text())
    differences = summary["software_differences"]
    changed = {d["key"]: d for d in differences}
    key = f"module_objects.{MODULE}"
    assert key in changed, differences
    assert changed[key]["original"] == before["module_objects"][MODULE]
    assert changed[key]["rerun"] not in (None, before["module_objects"][MODULE])
    # hashes first: the module's (as loaded, and its programs' tags), the loader binary's that carries it
    keys = [d["key"] for d in differences]
    first_other = next((i for i, d in enumerate(differences) if not _is_hash(d["key"], d["original"], d["rerun"])),
                       len(differences))
    assert keys.index(key) < first_other, keys
    assert all(MODULE in k or "cellab-modules" in k for k in keys[:first_other]), keys
    lines = [line.strip() for line in again.stdout.splitlines()]
    said = next(i for i, line in enumerate(lines) if "software differs in" in line)
    shown = [line.split(":")[0] for line in lines[said + 1: said + 1 + min(first_other, 12)]]
    assert shown == keys[:len(shown)] and all(MODULE in k or "cellab-modules" in k for k in shown), lines[said:]
    assert said < next(i for i, line in enumerate(lines) if line.startswith(f"run {run_id}:"))  # before results
