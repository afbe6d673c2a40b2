"""The fidelity bench's shapes: what a run of the bench covers (Grid) and what one case measured on one lab."""

from __future__ import annotations

from dataclasses import dataclass, field

DOWNLOAD_SR_MS = 20  # the SR period of every case but the idle grid


@dataclass(frozen=True)
class Grid:
    """What a fidelity run covers."""

    n_prb: tuple[int, ...] = (6, 15, 25, 50)
    sr_period_ms: tuple[int, ...] = (5, 10, 20, 40, 80)
    idle_pings: int = 20
    download_ccs: tuple[str, ...] = ("cubic", "bbr")
    download_n_prb: tuple[int, ...] = (6, 15, 25, 50)
    download_s: float = 10.0
    snr_db: tuple[float, ...] = (30, 20, 10)  # the real stack's SNR at 0, 10 and 20 dB of attenuation
    shared_n_prb: int = 25  # the attenuation steps and the two-UE case
    upload_n_prb: tuple[int, ...] = (25,)
    two_ues: bool = True
    recovery_n_prb: tuple[int, ...] = (25,)
    max_attempts: int = 2
    # runs per case and lab: a cell is judged on the interval of virtual/real over them (cellab.fidelity.judge)
    repeats: int = 5
    download_sr_ms: int = DOWNLOAD_SR_MS  # the downloads' SR period (`cellab fidelity --sr-period-ms` sets it)


@dataclass
class CaseValues:
    """What one case measured on one lab (values by metric), or why it did not."""

    values: dict[str, float] = field(default_factory=dict)
    detail: dict[str, str] = field(default_factory=dict)  # metric -> extra numbers for the table
    error: str | None = None
    missing: dict[str, str] = field(default_factory=dict)  # metric -> why this run has no value of it
