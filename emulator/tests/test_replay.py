"""The cell's model replayed without a clock: a fixed, seeded load through the C units cellab-cell is built
from (cell_replay.c), so that every TTI record, every delivered packet and the final stats are deterministic.

The fingerprints below were taken from the single-file cell.c before it was split into units; a change of
the model changes them on purpose (then record the new ones and say why in the commit), anything else
that changes them is a regression. No root, no namespaces."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import SHARED

EMULATOR = Path(__file__).resolve().parents[1]
TRACES = SHARED / "traces"


def _ues(n: int) -> list[str]:
    args = ["--srv", "s:t"]
    for i in range(n):
        args += ["--ue", f"u{i}:t:10.200.1.{i + 1}"]
    return args


SCENARIOS: dict[str, tuple[int, list[str], str]] = {
    "fading_harq_jitter": (6000, _ues(3) + [
        "--n-prb", "25", "--attenuation-db", "0,40,52", "--fading-db", "4", "--fading-coherence-ms", "10",
        "--cqi-period-ms", "20", "--rlc-queue-bytes", "100000", "--core-delay-ms", "5", "--internet-delay-ms",
        "10", "--core-jitter-ms", "2", "--seed", "7"],
        "453dd0900fda0573801c8bc92e90cf38868b68bcc87c82021d3c3ed7880177b1"),
    "sr_strict_6prb": (6000, _ues(2) + [
        "--ul-policy", "sr-strict", "--sr-period-ms", "40", "--n-prb", "6", "--harq-max-tx", "2",
        "--attenuation-db", "45", "--fading-db", "6", "--seed", "3", "--cqi-period-ms", "5", "--cqi-delay-ms", "8"],
        "ef32912bb8103cada2c8129c0c9be77d72f13a0e7fbca52cee6fd8775d626724"),
    "trace_both_ways": (4000, _ues(3) + [
        "--trace", str(TRACES / "TMobile-LTE-short.down"), "--trace-up", str(TRACES / "TMobile-LTE-short.up"),
        "--rlc-queue-bytes", "300000"],
        "92a3b309bbb3daf364f1d7ebd7b50d640c649cc545b2d309eccf8499aa9bc18a"),
    "unlimited": (3000, _ues(3) + ["--unlimited", "--core-delay-ms", "3"],
                  "f128a1620663cdf7c25f3d9df41190d3a49498235108a2389c3e04e5b9d2f44b"),
    "srsenb_100prb_small_ul": (3000, _ues(3) + [
        "--n-prb", "100", "--sr-period-ms", "5", "--bsr-timer-ms", "10", "--ul-prb", "20", "--ul-mcs", "10",
        "--ul-buffer-bytes", "20000", "--attenuation-db", "30", "--fading-db", "8", "--seed", "11"],
        "38213b13a86cbc4d07c497a53e666b1f1023c7996ee9d9b50c4602803bd52087"),
    "sixteen_ues": (3000, _ues(16) + [
        "--n-prb", "50", "--sr-period-ms", "10", "--attenuation-db", "20", "--fading-db", "3", "--seed", "5",
        "--rlc-queue-bytes", "50000"],
        "fe988d6c30d0b1004e33804548eb56cd1526a281eaea2331d972cf791786b0a7"),
    "edge_of_range": (2000, _ues(1) + [
        "--sr-period-ms", "80", "--cqi-period-ms", "160", "--n-prb", "15", "--attenuation-db", "62",
        "--fading-db", "10", "--fading-coherence-ms", "1"],
        "b7c15f8abbc67ba74bb3b5d7032998a1553bb70e99b9ae553426480db2ce0961"),
}


@pytest.fixture(scope="module")
def replay(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler")
    units = sorted(p for p in EMULATOR.glob("*.c") if p.name != "cell.c")  # cell.c holds main()
    flags = subprocess.run(["pkg-config", "--cflags", "--libs", "libzmq", "jansson"], capture_output=True,
                           text=True, check=True).stdout.split()
    out = tmp_path_factory.mktemp("replay") / "cell_replay"
    subprocess.run([cc, "-std=c11", "-O2", "-Wall", "-Wextra", "-Werror", "-D_GNU_SOURCE", f"-I{EMULATOR}",
                    "-o", str(out), str(Path(__file__).with_name("cell_replay.c")), *map(str, units), *flags,
                    "-lm"], check=True)
    return out


def _run(replay: Path, tmp_path: Path, n_tti: int, args: list[str]) -> tuple[bytes, str]:
    log = tmp_path / "tti.bin"
    out = subprocess.run([str(replay), str(n_tti), *args, "--tti-log", str(log)], capture_output=True, text=True,
                         timeout=60, check=True)
    return log.read_bytes(), out.stdout


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_replay_matches_the_model_fingerprint(replay, tmp_path, name):
    n_tti, args, fingerprint = SCENARIOS[name]
    records, stdout = _run(replay, tmp_path, n_tti, args)
    lines = stdout.splitlines()
    stats = json.loads(lines[-2])
    assert stats["tti"] == n_tti and stats["fwd_pkts"] > 0  # the load really went through
    assert len(records) == 44 * n_tti * len(stats["ues"])
    assert hashlib.sha256(records + stdout.encode()).hexdigest() == fingerprint


def test_replay_is_deterministic_and_uses_every_path(replay, tmp_path):
    n_tti, args, _ = SCENARIOS["fading_harq_jitter"]
    first = _run(replay, tmp_path, n_tti, args)
    assert _run(replay, tmp_path, n_tti, args) == first
    ues = json.loads(first[1].splitlines()[-2])["ues"]
    assert all(sum(u[key] for u in ues) > 0
               for key in ("harq_retx", "dl_lost_pkts", "dl_drop_pkts", "sr_sent", "ul_delivered_bytes"))
