"""A probe log's time, checked before it becomes a trace (issue 42: a log whose time goes backwards was sorted
silently, so a clock stepped back mid-recording merged two stretches of the network into one). The probe writes
each flow's rows in time order (flows interleave: a quiet flow's row for an earlier millisecond may follow a busy
one's), so time going back within one flow means the recording's clock stepped, and the log is refused naming
the row, the flow and both times."""

from __future__ import annotations

from pathlib import Path

from cellab.errors import InputError


def check_time_order(path: Path, rows: list[tuple[int, dict[str, str]]], times: list[float], column: str) -> None:
    """rows: (line, cells) as read; times: each row's time in `column`'s unit, in the same order."""
    last: dict[str, tuple[float, int]] = {}
    for (line, cells), t in zip(rows, times, strict=True):
        flow = cells.get("flow", "")
        before = last.get(flow)
        if before is not None and t < before[0]:
            raise InputError(path, f"row {line}.{column}", f"time goes back in flow {flow}: {t:.15g} after {before[0]:.15g} "
                             f"(row {before[1]}); the recording's clock stepped, so the log is no trace",
                             ["each flow's times non-decreasing"])
        last[flow] = (t, line)
