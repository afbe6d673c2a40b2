"""The wall time of the virtual cell's TTIs. Its TTI log and its events count TTIs from its start; it also writes
its own stack clock (the wall time each TTI ran: `stack-clock-dl.bin` in the run's artifacts, key `stack_clock_dl`,
emulator/README.md "The cell's own clock"). On a recorded clock (the cell parameter `clock_file`, the fidelity
bench's virtual side) a TTI is not a millisecond, so that clock is the mapping; a run without it (collected before
the cell wrote one) falls back to one TTI per millisecond from the mark read before the workload."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cellab.errors import InputError
from cellab.labs.clock import StackClock


def cell_clock(mark: dict[str, float], clock_file: Path | None) -> Callable[[Any], np.ndarray]:
    """TTIs -> epoch seconds at which the cell ran them (an InputError names a bad clock file)."""
    clock = StackClock.from_file(clock_file) if clock_file is not None and Path(clock_file).is_file() else None
    if clock is not None and clock.ttis:
        on_clock = np.vectorize(clock.wall_at, otypes=[np.float64])
        # the cell's TTI k is stack TTI k + 1 (it begins then): its clock's first_tti counts the records of the
        # segments before the file's first (a capped log, emulator/logcap.c), 0 for a whole one
        return lambda ttis: on_clock(np.asarray(ttis, dtype=np.float64) + 1.0)
    return lambda ttis: (np.asarray(ttis, dtype=np.float64) - mark["tti"]) / 1000.0 + mark["t_s"]


def stack_seconds(clock_file: Path | None, t0_s: float) -> Callable[[float], float] | None:
    """A time on the workload's axis (s from `t0_s`, epoch) -> the lab's stack seconds, from the run's stack clock
    (srsran-zmq's broker: `stack-clock-dl`); None without one, or with one unusable (the run's validity judges it,
    not its recovery figures)."""
    if clock_file is None or not Path(clock_file).is_file():
        return None
    try:
        clock = StackClock.from_file(clock_file)
    except InputError:
        return None
    return lambda t: clock.stack_s(t0_s + t)
