"""A campaign's run rules: when a run is invalid and retried (`retry`), and when a cell of the matrix has been
repeated enough (`until`). Kept apart from cellab.campaign.model (which re-exports them) for its size."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, field_validator, model_validator

from cellab.records import Strict

#: the lateness thresholds the virtual cell counts TTIs beyond (emulator/cell.c cell_late_bins_us), in ms
LATE_TTI_THRESHOLDS_MS = (0.5, 1.0, 2.0, 5.0, 10.0, 50.0)


class Retry(Strict):
    max_attempts: int = Field(1, ge=1, le=10)
    backoff_s: float = Field(2.0, ge=0, le=600)
    # A TTI run late delays the packets it delivers by that much and no more (the cell runs every TTI it owes,
    # so rates keep the model's); what disturbs a measurement is a stall of several TTIs. Measured on a 2-core
    # VM (SCHED_FIFO cell, iperf3 through it): 6.3 % of TTIs > 0.5 ms late, 1.6 % > 2 ms, 0.2 % > 5 ms, the
    # worst 9.8 ms, the packets' delivery error p50 78 us and p99 2.0 ms; idle, none > 5 ms.
    max_late_tti_fraction: float | None = Field(
        0.01, ge=0, le=1,
        description="virtual lab: a run whose cell ran more of its TTIs than this more than late_tti_ms late, or "
                    "resynced its clock after a stall (200 TTIs), measured the host, not the model: it is invalid "
                    "(and retried); null: keep every run")
    late_tti_ms: float = Field(
        5.0, description="how late a TTI must run to count against max_late_tti_fraction; one of "
                         + ", ".join(f"{t:g}" for t in LATE_TTI_THRESHOLDS_MS) + " (the cell counts those)")
    # srsRAN over ZMQ is clocked by its own samples, not the wall: on a busy host it runs in slow motion (issue 31:
    # 12.8 Mbit/s instead of 16.4 at 25 PRB, idle RTT 52.8 ms instead of 37-43), and every rate and timer with it.
    # Measured on a quiet 2-core VM: 0.50-0.56 of real time with one UE, 0.34 with two (the broker's samples; the
    # eNB's own TTI rate, 492-558 per second, agrees). So such a run is measured on the stack's own clock (issue 37:
    # the broker's record of each TTI, cellab.labs.clock): how slow it ran is recorded (lab_timing.stack_clock),
    # not judged, unless a user wants real time (min_stack_speed)
    min_stack_speed: float | None = Field(
        None, gt=0, le=1,
        description="srsran-zmq: a run whose srsRAN stack moved fewer radio samples than this share of real time's "
                    "during the run (the ZMQ broker's rate against the cell's sample rate) is invalid (and "
                    "retried); null (the default): the speed is recorded, not judged")
    # Inside srsRAN every timer (RLC, MAC, RRC's T310/T311, NAS) counts TTIs, so a stall stops them with the stack;
    # what a stall breaks is in wall time: the stack's ZMQ radio gives a receive up after 2000 ms (srsRAN's
    # ZMQ_TIMEOUT_MS), the core's NAS/S1 timers are seconds, and the workload's TCP peer on the server retransmits
    # after its minimum RTO, 200 ms (Linux TCP_RTO_MIN): the least of them is the bound
    max_stack_gap_ms: float | None = Field(
        200.0, gt=0, le=60000,
        description="srsran-zmq: a run whose stack clock (the ZMQ broker's record of each TTI) does not cover the "
                    "workload, or stalls longer than this between two TTIs during it (the server's TCP "
                    "retransmits after 200 ms, its minimum RTO), is invalid (and retried), naming the stall; "
                    "null: not judged")
    after_worker_loss: bool = Field(
        False, description="distributed runs (--slots, --cluster): run again, on another worker, a run whose worker "
                           "died while it ran (off: such a run fails naming the worker; hardware is not driven twice "
                           "behind the user's back)")

    @field_validator("late_tti_ms")
    @classmethod
    def _counted_threshold(cls, value: float) -> float:
        if value not in LATE_TTI_THRESHOLDS_MS:
            raise ValueError("must be one of " + ", ".join(f"{t:g}" for t in LATE_TTI_THRESHOLDS_MS)
                             + " (the lateness thresholds the virtual cell counts)")
        return value

    def late_ttis(self, timing: Mapping[str, Any]) -> int:
        """TTIs of the run later than late_tti_ms, from a lab's timing_faults()."""
        return int(timing.get("late_ttis_over_us", {}).get(str(round(self.late_tti_ms * 1000)), 0))

    def host_stalled(self, timing: Mapping[str, Any]) -> bool:
        """The rule above, for the runner and for tests that measure through the cell."""
        limit, ttis = self.max_late_tti_fraction, int(timing.get("ttis", 0))
        return limit is not None and ttis > 0 and (
            int(timing.get("resyncs", 0)) > 0 or self.late_ttis(timing) > limit * ttis)

    def stack_too_slow(self, timing: Mapping[str, Any]) -> bool:
        speed = timing.get("stack_speed")
        return self.min_stack_speed is not None and isinstance(speed, (int, float)) and speed < self.min_stack_speed

    def invalid_reason(self, timing: Mapping[str, Any]) -> str | None:
        """Why a run with this lab timing (a lab's timing_faults()) measured the host, or None."""
        if self.host_stalled(timing):
            return f"the host stalled the virtual cell: {self.stall_text(timing)}"
        if timing.get("stack_clock_invalid"):
            return "the stack clock does not cover the workload: " + "; ".join(timing["stack_clock_invalid"])
        if self.stack_too_slow(timing):
            return (f"the srsRAN stack ran at {timing['stack_speed']:.0%} of real time "
                    f"({timing.get('stack_msps', 0):.2f} of {timing.get('nominal_msps', 0):.2f} Msps through the "
                    f"broker; retry.min_stack_speed {self.min_stack_speed})")
        return None

    def stall_text(self, timing: Mapping[str, Any]) -> str:
        return (f"{self.late_ttis(timing)} of {timing.get('ttis', 0)} TTIs more than {self.late_tti_ms:g} ms late "
                f"(the worst {timing.get('late_max_us', 0) / 1000:.1f} ms), {timing.get('resyncs', 0)} clock resyncs "
                f"(retry.max_late_tti_fraction {self.max_late_tti_fraction})")



#: metrics a stopping rule may watch (docs/metrics.md): one number per run, always there when the run is ok
STOP_METRICS = ("throughput_bps", "rtt_mean_ms", "rtt_p95_ms", "rtt_max_ms", "fct_mean_s", "loss_rate",
                "retransmits", "owd_mean_ms", "owd_p95_ms", "jain_fairness", "ue_fairness_jain", "utilization")


#: what a named comparison compares when it names no metrics: the report's two (throughput and delay)
COMPARED_METRICS = ("throughput_bps", "rtt_p95_ms")


class NamedComparison(Strict):
    """One level of a factor against another (its baseline), on one or more metrics: the ratio of their medians
    over runs, with a 95 % bootstrap interval and a Mann–Whitney U test, in every cell of the other factors
    (stored in results.sqlite, table comparisons; shown in the report; `until.comparison` may stop on it)."""

    factor: str = Field(description="a factor of the campaign (`factors`)")
    level: str = Field(description="the level compared, e.g. c2tcp")
    baseline: str = Field(description="the level it is compared against, e.g. cubic")
    metrics: list[Literal[STOP_METRICS]] = Field(  # type: ignore[valid-type]
        list(COMPARED_METRICS), min_length=1, description="the metrics whose ratios are compared")


class StopRule(Strict):
    """Sequential repeats: after `repeat` runs of a cell of the matrix, more until the metric's 95 % confidence
    interval (of its mean, Student t) is at most `ci_fraction` of the mean on each side, or `max` runs. With
    `comparison` instead of `metric`: the two cells of that comparison (level and baseline, in each cell of the
    other factors) get one more run each until every metric's ratio has a 95 % bootstrap interval within
    ±`ci_fraction` of the ratio, or `max` runs; the other cells run `repeat` times. The metrics must be ones every
    run reports (otherwise each cell would run `max` times): one-way delay needs `tool: probe`, `ue_fairness_jain`
    two UEs in every run, `utilization` a virtual lab's cell."""

    metric: Literal[STOP_METRICS] | None = Field(  # type: ignore[valid-type]
        None, description="the metric whose interval decides (or `comparison`)")
    comparison: str | None = Field(None, description="the name of a comparison in `comparisons` whose ratios' "
                                                     "intervals decide (instead of `metric`)")
    ci_fraction: float = Field(gt=0, le=1, description="half-width of the 95 % interval / |mean| (of the ratio, "
                                                       "with `comparison`), at most")
    max: int = Field(ge=1, le=1000, description="runs of one cell at the most")

    @model_validator(mode="after")
    def _one_target(self) -> StopRule:
        if (self.metric is None) == (self.comparison is None):
            raise ValueError("give one of metric (a metric's interval) or comparison (a named comparison's ratios)")
        return self

    def describe(self) -> str:
        """The rule in words: `cellab plan` and the report say it."""
        target = (f"comparison {self.comparison}'s ratios' 95 % intervals are" if self.comparison
                  else f"{self.metric}'s 95 % interval is")
        return f"until {target} within ±{100 * self.ci_fraction:g} %"
