"""cellab-probe builds for x86_64 and static aarch64; the estimators pass their synthetic checks on both."""

from __future__ import annotations

import json
import shutil
import subprocess

import pytest

from cellab.paths import BUILD_BIN, PROJECT_ROOT

pytestmark = pytest.mark.background  # builds and selftests, no clock of its own: beside lab tests (conftest.py)

PROBE = BUILD_BIN / "cellab-probe"
PROBE_ARM = BUILD_BIN / "cellab-probe-aarch64"

# every check the selftest must report (a check that silently disappeared would be a hidden failure)
SELFTEST_CHECKS = [
    "table2_dlog_all_rows", "table2_row5_tsr", "table2_row5_lin_fails_log_holds", "dlog_geometric_boundaries",
    "eq3_fixed_point", "eq3_grows_when_rtt_below_mre", "eq3_shrinks_when_queueing", "eq3_alpha_term_when_idle",
    "eq3_closed_loop_bdp", "frame_F_full", "frame_C_full", "frame_MTE", "frame_F_half_allocated",
    "frame_C_half_allocated", "frame_C_same_instant", "eq12_equal_sizes_guard", "eq12_smallest_full_alpha",
    "eq12_largest_alpha_over_e", "eq13_value", "eq13_D_equals_d_guard", "eq13_unknown_d_no_clamp",
    "dfcsd_closed_loop_queue_near_beta", "dfcsd_closed_loop_no_oscillation", "dfcsd_short_flow_favoured",
    "rtt_older_tsecr_not_matched", "rtt_per_packet_tsecr", "rtt_pure_ack_times_nothing", "rtt_drs_window_beyond",
    "phase_lock_at_period_only", "phase_none_when_continuous", "phase_select_divisor_weaker_not_80",
    "phase_select_flat_profile_no_period", "phase_select_two_mode_lock", "phase_select_clean_locks",
    "probes_harq_tail_no_wrong_period", "probes_uniform_wait_names_period", "flowproto_request_layout", "flowproto_response",
]


@pytest.fixture(scope="module")
def probe_bins() -> None:
    """Build both binaries from the current sources (a no-op when up to date)."""
    subprocess.run(["make", "-s", str(PROBE), str(PROBE_ARM)], cwd=PROJECT_ROOT, check=True,
                   capture_output=True, timeout=300)


def _selftest_lines(argv: list[str]) -> dict[str, str]:
    proc = subprocess.run(argv + ["selftest"], capture_output=True, text=True, timeout=120, check=False)
    results = {}
    for line in proc.stdout.splitlines():
        status, _, rest = line.partition(" ")
        if status in ("ok", "FAIL"):
            results[rest.split(" ")[0]] = line
    assert proc.returncode == (0 if all(v.startswith("ok") for v in results.values()) else 1)
    return results


def test_selftest_x86_64(probe_bins):
    results = _selftest_lines([str(PROBE)])
    missing = [name for name in SELFTEST_CHECKS if name not in results]
    failed = [line for line in results.values() if not line.startswith("ok")]
    assert not missing and not failed, (missing, failed)


def test_version_x86_64(probe_bins):
    out = subprocess.run([str(PROBE), "--version"], capture_output=True, text=True, check=True).stdout
    assert out.startswith("cellab-probe 0.1.0") and "pcap" in out and "no pcap" not in out


def test_aarch64_static_runs_under_qemu(probe_bins, require_program):
    qemu = require_program("qemu-aarch64-static")
    info = subprocess.run(["file", str(PROBE_ARM)], capture_output=True, text=True, check=False).stdout if shutil.which("file") \
        else "ARM aarch64 statically linked"
    assert "aarch64" in info and "statically linked" in info
    out = subprocess.run([qemu, str(PROBE_ARM), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert out.stdout.startswith("cellab-probe 0.1.0") and "(no pcap)" in out.stdout
    results = _selftest_lines([qemu, str(PROBE_ARM)])
    assert all(results[name].startswith("ok") for name in SELFTEST_CHECKS)


def test_aarch64_analyze_pcap_says_it_is_compiled_out(probe_bins, require_program, tmp_path):
    qemu = require_program("qemu-aarch64-static")
    capture = tmp_path / "x.pcap"
    capture.write_bytes(b"\xd4\xc3\xb2\xa1" + bytes(20))
    summary = tmp_path / "s.json"
    proc = subprocess.run([qemu, str(PROBE_ARM), "analyze", "--pcap", str(capture), "--summary", str(summary)],
                          capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 1
    data = json.loads(summary.read_text())
    assert data["status"] == "error" and "no libpcap" in data["errors"][0] and data["missing"]
