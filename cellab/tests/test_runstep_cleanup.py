"""Stopping what a workload started: after a failed workload a clean-up step's own error (the agent's safe state
already stopped the capture or the sender) does not replace the failure's; after a good workload it is the run's
error, and otherwise the step's result is returned (the sender's log files)."""

from __future__ import annotations

import pytest

from cellab.bus import OperationError
from cellab.run.workloads import clean_up


def _already_stopped() -> None:
    raise OperationError("server", "capture_stop", "no capture is running")


def test_after_a_failed_workload_the_clean_up_error_does_not_hide_the_failure():
    with pytest.raises(RuntimeError, match="the workload's own failure"):
        try:
            raise RuntimeError("the workload's own failure")
        finally:
            clean_up(True, _already_stopped)


def test_after_a_good_workload_the_clean_up_error_is_the_runs():
    with pytest.raises(OperationError, match="no capture is running"):
        clean_up(False, _already_stopped)


def test_a_clean_up_step_gives_its_result():
    assert clean_up(False, lambda: "logs") == "logs"
