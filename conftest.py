"""Fixtures shared by every room's tests."""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import time
from pathlib import Path

import pytest


def have_root() -> bool:
    return os.geteuid() == 0


@pytest.fixture
def require_root() -> None:
    if not have_root():
        pytest.skip("needs root: network namespaces and BPF (CI runs as root)")


@pytest.fixture
def netns_prefix() -> str:
    """A namespace-name prefix no other test (or helper session) uses."""
    return "ct" + secrets.token_hex(2)


@pytest.fixture
def require_program():
    def check(name: str) -> str:
        path = shutil.which(name)
        if path is None:
            pytest.fail(f"{name} is missing: `make setup` installs it")
        return path

    return check


def measure_on_time(lab, measure, late_tti_ms: float = 5.0):
    """measure(), taken again (up to three tries) when the virtual lab's cell reports that the host stalled it during the
    try before (more TTIs over late_tti_ms late than a campaign allows, or a clock resync): such a measurement
    is of the host, and the cell says so itself. Fails if all three were. A test asserting millisecond spreads
    passes a smaller late_tti_ms (the runner's default, 5 ms, keeps a VM's scheduling noise)."""
    from cellab.campaign.model import Retry

    rule = Retry(late_tti_ms=late_tti_ms)

    def counts() -> dict:
        with lab.control() as ctl:
            return ctl.stats()

    for _ in range(3):
        before = counts()
        result = measure()
        after = counts()
        timing = {"ttis": after["tti"] - before["tti"], "resyncs": after["resyncs"] - before["resyncs"],
                  "late_max_us": after["late_max_us"],
                  "late_ttis_over_us": {k: n - before["late_ttis_over_us"][k]
                                        for k, n in after["late_ttis_over_us"].items()}}
        if not rule.host_stalled(timing):
            return result
        print(f"the host stalled the cell: {rule.stall_text(timing)}; measuring again")
    pytest.fail(f"the host stalled the cell in all three tries ({rule.stall_text(timing)} in the last): nothing "
                "measured of the model")


@pytest.fixture
def on_time():
    """measure_on_time, for tests that measure timing through an emulated cell."""
    return measure_on_time


# --- running in parallel (pytest-xdist: `make test` runs `-n 3`) -------------------------------------------
# Lab instances never collide (each test has its own prefix, cellab.labs.instances), but two lab tests side by
# side do not share 2 cores: measured with every lab test parallel, the virtual cells ran 6 % of their TTIs
# more than 5 ms late (the worst 45 ms) and the BPF congestion controls, host-wide registrations, were loaded
# and unloaded under each other's flows. So a test that needs root (namespaces, BPF: the lab tests) or runs
# srsRAN holds this lock exclusively, and every other test holds it shared: unit tests run three at a time, a lab
# test runs alone. Lab tests that keep no clock and load no module (marker `shares_cpu`: wired labs, checking
# what a campaign, a cluster or an inventory does) run beside others: their instances never collide.
CPU_LOCK = "/tmp/cellab-pytest-cpu.lock"
CPU_GATE = "/tmp/cellab-pytest-cpu.gate"  # the lock's waiting line: see pytest_runtest_protocol
# each test's duration (s) in a clean-clone run, for the order below; remade from a CELLAB_TEST_TIMELINE file with
#   python3 -c 'import json,sys; print(json.dumps({r["test"]: round(r["ended"]-r["got"], 1) for r in
#     map(json.loads, open(sys.argv[1])) if r["ended"]-r["got"] >= 1}, indent=0, sort_keys=True))' T.jsonl
# A stale or missing file only makes the order worse, never a test wrong.
TEST_DURATIONS = Path(__file__).parent / ".ci" / "test-durations.json"
#: fixtures that bring up srsRAN processes (the bundle, its lock, a core namespace with srsue)
SRSRAN_FIXTURES = {"bundle", "srsran_ready", "srsran_lock", "srsenb_bin", "core_netns"}
SRSRAN_FILES = {"test_srsepc.py", "test_inventory_on_the_cell.py"}  # take the srsRAN lock inside the test


def pytest_configure(config):
    config.addinivalue_line("markers", "cpu_heavy: runs alone on the host when tests run in parallel")
    config.addinivalue_line("markers", "background: a unit test with no clock of its own to keep (readers, fuzzers, "
                            "renderers; no root, no short timeout): runs at SCHED_IDLE beside any test, a lab test "
                            "alone included, on the CPU that test leaves idle")
    config.addinivalue_line("markers", "shares_cpu: a root test that checks function on labs that keep no clock "
                            "(wired: the kernel's tbf shapes it), with no BPF module: runs beside other tests")


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & SRSRAN_FIXTURES or (item.path.name in SRSRAN_FILES and "require_root" in names):
            item.add_marker(pytest.mark.cpu_heavy)
    if os.environ.get("PYTEST_XDIST_WORKER"):
        items[:] = _parallel_order(items)


def _lock_kind(item) -> str:
    """background (SCHED_IDLE, no lock), exclusive (the CPU lock alone) or shared (the lock beside others)."""
    names = getattr(item, "fixturenames", ())
    if item.get_closest_marker("background") is not None and "require_root" not in names:
        return "background"
    if item.get_closest_marker("cpu_heavy") is not None or (
            "require_root" in names and item.get_closest_marker("shares_cpu") is None):
        return "exclusive"
    return "shared"


@functools.cache
def _past_durations_s() -> dict[str, float]:
    """TEST_DURATIONS read once: test id -> seconds ({} when the file is missing or not such a mapping)."""
    try:
        data = json.loads(TEST_DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: float(v) for k, v in data.items() if isinstance(v, int | float)}


def _expected_s(item) -> float:
    """A test's duration in a past run (TEST_DURATIONS), 1 s for one not listed."""
    return _past_durations_s().get(item.nodeid, 1.0)


def _parallel_order(items: list) -> list:
    """The order workers take tests in (`make test` hands them out one at a time: --maxschedchunk 1). A lab test
    running alone leaves about one of the two cores idle (measured: 47 % idle over its 560 s, when the workers
    waiting for the lock held shared tests): so the exclusive tests come first, each followed by background
    tests in proportion to its past duration (none after an srsRAN test: it wants both cores), which run on that
    idle core at SCHED_IDLE; the shared tests, which would only wait for the lock there, come last, longest first,
    so that no long one starts when the others are ending. Every worker collects the same items, so every worker
    computes the same order. Measured from clean clones: pytest 16:28 in the old order, 14:28 in this one.
    Tried and dropped: a scheduler that gave the other workers background tests whenever a lab test was out:
    beside srsRAN they slowed it (the srsEPC attach test 18 -> 66 s) and the suite lost more than it gained."""
    kinds: dict[str, list] = {"exclusive": [], "background": [], "shared": []}
    for item in items:
        kinds[_lock_kind(item)].append(item)
    exclusive, background = kinds["exclusive"], kinds["background"]
    if not exclusive:
        return items
    weights = [0.0 if item.get_closest_marker("cpu_heavy") else _expected_s(item) for item in exclusive]
    total = sum(weights) or 1.0
    ordered: list = []
    done_weight, taken = 0.0, 0
    for item, weight in zip(exclusive, weights, strict=True):
        ordered.append(item)
        done_weight += weight
        share = round(len(background) * done_weight / total)
        ordered += background[taken:share]
        taken = share
    ordered += background[taken:]
    return ordered + sorted(kinds["shared"], key=_expected_s, reverse=True)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    """The lock spans the test's whole protocol: its setup, call and teardown, including the module- and
    session-scoped fixtures set up or torn down with it (builds, shared labs), not only the test's body."""
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        yield
        return
    import fcntl

    asked = time.monotonic()
    kind = _lock_kind(item)
    if kind == "background":
        with _idle_class():
            yield
        _note_timeline(item, kind, asked, asked)
        return
    with open(CPU_LOCK, "a") as handle:
        # flock prefers no one: workers taking shared tests back to back kept an exclusive one waiting 149 s in
        # clean-clone run 33. So every test passes a gate first, and an exclusive test holds it until it has the
        # lock: from its asking on, new shared tests wait for it.
        with open(CPU_GATE, "a") as gate:
            fcntl.flock(gate, fcntl.LOCK_EX)
            if kind == "exclusive":
                fcntl.flock(handle, fcntl.LOCK_EX)
        if kind != "exclusive":
            fcntl.flock(handle, fcntl.LOCK_SH)
        got = time.monotonic()
        yield
    _note_timeline(item, kind, asked, got)


def _note_timeline(item, kind: str, asked: float, got: float) -> None:
    """CELLAB_TEST_TIMELINE=FILE: one JSON line per test (worker, lock kind, when it asked for the lock, got it,
    ended), to see where a parallel run waits."""
    path = os.environ.get("CELLAB_TEST_TIMELINE")
    if path:
        import json

        line = {"test": item.nodeid, "worker": os.environ.get("PYTEST_XDIST_WORKER"), "kind": kind,
                "asked": asked, "got": got, "ended": time.monotonic()}
        with open(path, "a") as out:
            out.write(json.dumps(line) + "\n")


class _idle_class:
    """This thread (and what it starts) at SCHED_IDLE: it gets a CPU only when nothing else wants it, so a lab test
    running alone (the exclusive lock) keeps its timing, and the unit test uses the core the lab test leaves idle
    (most lab tests use one of the two). Measured: no lab test failed beside them in three full runs; the time
    saved was within this VM's run-to-run variance (17:35-17:50 of pytest with them, 17:46 without)."""

    def __enter__(self) -> None:
        self.before = os.sched_getscheduler(0)
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
        except OSError:
            self.before = None

    def __exit__(self, *exc: object) -> None:
        if self.before is not None:
            try:
                os.sched_setscheduler(0, self.before, os.sched_param(0))
            except OSError:  # an unprivileged thread may not leave SCHED_IDLE: it has no lab test to run then
                pass
