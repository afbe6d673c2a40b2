"""The cell's model replayed without a clock: a fixed, seeded load through the C units cellab-cell is built
from (cell_replay.c), so that every TTI record, every delivered packet and the final stats are deterministic.

The fingerprints below were taken from the single-file cell.c before it was split into units (retaken when the
stats gained the PDCP discard counters, and again when they gained ul_drop_pkts with srsue's uplink queue as the
default: TTI records, delivered packets and every other stat unchanged both times); a change of
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

pytestmark = pytest.mark.background  # no clock, no root: beside a lab test at SCHED_IDLE (conftest.py)

EMULATOR = Path(__file__).resolve().parents[1]
TRACES = SHARED / "traces"


def _ues(n: int) -> list[str]:
    args = ["--srv", "s:t"]
    for i in range(n):
        args += ["--ue", f"u{i}:t:10.200.1.{i + 1}"]
    return args


DEEP = "bytes:4194304"  # the byte-limited queue the scenarios were fingerprinted with (the default before srsenb's)

SCENARIOS: dict[str, tuple[int, list[str], str]] = {
    "fading_harq_jitter": (6000, _ues(3) + [
        "--n-prb", "25", "--attenuation-db", "0,40,52", "--fading-db", "4", "--fading-coherence-ms", "10",
        "--cqi-period-ms", "20", "--rlc-queue", "bytes:100000", "--core-delay-ms", "5", "--internet-delay-ms",
        "10", "--core-jitter-ms", "2", "--seed", "7"],
        "2171afb3d971dff684cb33e0d85cb3da76ee24a8d8ae317a13df3fbeced23605"),
    "sr_strict_6prb": (6000, _ues(2) + [
        "--ul-policy", "sr-strict", "--sr-period-ms", "40", "--n-prb", "6", "--harq-max-tx", "2",
        "--attenuation-db", "45", "--fading-db", "6", "--seed", "3", "--cqi-period-ms", "5", "--cqi-delay-ms", "8",
        "--rlc-queue", DEEP],
        "03964da3ebd7f319d349a16c87e7e9b28cf2e806a07e7b8921c835db9a44e0ea"),
    "trace_both_ways": (4000, _ues(3) + [
        "--trace", str(TRACES / "TMobile-LTE-short.down"), "--trace-up", str(TRACES / "TMobile-LTE-short.up"),
        "--rlc-queue", "bytes:300000"],
        "f04a364d8b9fcbf5bb47353bbaed23bf45c07a82279218ba463e16deb1c1270e"),
    "unlimited": (3000, _ues(3) + ["--unlimited", "--core-delay-ms", "3", "--rlc-queue", DEEP],
                  "5a792005d7178b8283618d5cc4408f3139c610caeaaef89c472c34f5d38484bf"),
    "srsenb_100prb_small_ul": (3000, _ues(3) + [
        "--n-prb", "100", "--sr-period-ms", "5", "--bsr-timer-ms", "10", "--ul-prb", "20", "--ul-mcs", "10",
        "--ul-queue", "bytes:20000", "--attenuation-db", "30", "--fading-db", "8", "--seed", "11",
        "--rlc-queue", DEEP],
        "98b714448e45a590b9bb450ccc2a115da6105a6eab04082c422cf41e10768b51"),
    "sixteen_ues": (3000, _ues(16) + [
        "--n-prb", "50", "--sr-period-ms", "10", "--attenuation-db", "20", "--fading-db", "3", "--seed", "5",
        "--rlc-queue", "bytes:50000"],
        "bece18c01212f9ddc9189fb644493db85a90b116e4f7bcfe228df4602c74024e"),
    "srsenb_queue_overload": (3000, _ues(3) + [  # srsenb's queue on a qci-9 bearer: SDU limit and discard both bind
        "--n-prb", "15", "--attenuation-db", "0,30,45", "--fading-db", "3", "--seed", "13", "--core-delay-ms", "3",
        "--pdcp-discard-ms", "150"],
        "01d4bc14a45161ab62cad6865b20f0ab44ed959f78b93ca31ff0f2dcf2436109"),
    "edge_of_range": (2000, _ues(1) + [
        "--sr-period-ms", "80", "--cqi-period-ms", "160", "--n-prb", "15", "--attenuation-db", "62",
        "--fading-db", "10", "--fading-coherence-ms", "1", "--rlc-queue", DEEP],
        "2ada3cb4b56d25a7602da2559849d4c971579f61728c9646838a75fc27ef12c9"),
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


def test_replay_srsenb_queue_drops_by_both_reasons(replay, tmp_path):
    """The default queue under overload: arrivals refused at 256 new packets, new packets discarded after 150 ms,
    and the counters add up (every offered packet is delivered, lost by HARQ, dropped, discarded or queued)."""
    n_tti, args, _ = SCENARIOS["srsenb_queue_overload"]
    ue0 = json.loads(_run(replay, tmp_path, n_tti, args)[1].splitlines()[-2])["ues"][0]
    assert ue0["dl_drop_pkts"] > 0 and ue0["dl_discard_pkts"] > 0
    assert ue0["dl_queue_new_pkts"] <= 256
    # UE 0 is offered two 1400-byte packets per TTI; those of the last 3 TTIs are still in the core delay line
    accounted = (ue0["delivered_pkts"] + ue0["dl_lost_pkts"] + ue0["dl_drop_pkts"] + ue0["dl_discard_pkts"]
                 + ue0["queue_bytes"] // 1400)
    assert accounted == 2 * (n_tti - 3)
