"""The SR period read in stack time: the grid every grant lands on.

An idle-uplink probe (cellab-probe `--sr-probes`) waits in the UE for an SR occasion; the eNB grants the uplink a
fixed number of TTIs after the SR, and the reply comes back a fixed number of TTIs after that. So in the stack's
own TTIs every reply lands on one grid: phase + k x P (plus a fraction of a TTI of processing). A UE that leaves an
occasion unused sends its SR P, 2P, ... later: skips add whole periods and never move the grid. This holds only on
the stack's clock: srsRAN over ZMQ runs TTIs at 340-700 per wall second within a run, so on the wall clock (or
any average ruler of it) the grid smears within a second.

The fit (all of it on the 80-TTI cycle, the period every candidate divides): each model is a grid of P TTIs
(P in 5, 10, 20, 40, 80) whose 80/P positions on the cycle are equally likely (the probes' random gaps put them
at every phase), each a Gaussian of the replies' jitter, plus a share of replies off the grid (HARQ
retransmissions, 8 TTIs late; anything else) spread uniformly. Two models of no SR period compete: replies on no
grid at all (uniform), and on every TTI (1: a grant whenever asked). Each model's evidence is its likelihood averaged over its
phase, jitter and off-grid share (so a free phase is paid for: noise fits some phase of an 80-TTI grid by chance). The truth P beats its divisors by log 2 per reply (their grids put half
their weight where no reply lands) and its multiples by more (half the replies fall off their grid), so
the best model is named when it leads every other by NAME_NATS; otherwise the periods within NAME_NATS of the
best are the candidates and no period is named (no answer, never a guess).

A probe sent less than POLL_GUARD_TTI stack TTIs after the previous reply may ride the eNB's own poll of a UE
that has just emptied its buffer (srsENB grants it once, 20 TTIs after its last PUSCH), not an SR: it is left
out, by stack time (known only on the clock).

Where this runs, and why: in the controller's post-processing of the probe's timestamps (metrics), not in the
probe. The clock exists only after the run (the broker records it, the lab fetches it at collect, after the probe
has finished); the probe also runs on phones that never see the lab's files; and a kept result folder can be read
again on its clock without the probe. The probe records each reply's CLOCK_REALTIME (`uplink_probes.reply_wall_ns`,
beside `rtt_ms`), the clock of the broker's records; they are read on its uplink record (`ue_clock`). On the wall
clock (a real eNB, the virtual lab) the probe's own wait fit, live and on that same clock, stays the answer; the
grid is reported beside it (`sr_grid`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

from cellab.errors import CellabError
from cellab.labs.clock import CLOCK_FILES, StackClock

PERIODS_TTI = (5, 10, 20, 40, 80)
NO_GRID, EVERY_TTI = 0, 1  # the two models of no SR period
MODELS = (NO_GRID, EVERY_TTI, *PERIODS_TTI)
CYCLE_TTI = 80  # every candidate period divides it
PHASE_STEP_TTI = 0.1
JITTER_SD_TTI = (0.2, 0.4, 0.8)  # a reply's spread around its grid position (processing, DL scheduling)
OFF_GRID_SHARE = (0.05, 0.15, 0.35)
WRAPS = 4  # neighbouring grid positions a Gaussian reaches (1-TTI grid at 0.8 TTI)
MIN_PROBES = 15
NAME_NATS = 3.0  # 20:1 over every other model
HIGH_NATS = 6.0
POLL_GUARD_TTI = 24


@dataclass
class GridEstimate:
    period_tti: int | None  # the SR period named, in stack TTIs (ms of stack time); None: no answer
    regime: str  # "sr-limited" | "not-sr-limited" | "undetermined"
    confidence: str  # "high" | "medium" | "none"
    reason: str
    ambiguous: bool = False
    candidates_tti: list[int] = field(default_factory=list)
    best_model: int | None = None  # 0 no grid, 1 every TTI, else the period
    margin_nats: float | None = None
    log_evidence: dict[str, float] = field(default_factory=dict)  # per model (0 no grid, 1 every TTI, periods)
    phase_tti: float | None = None  # of the best model, on the 80-TTI cycle from the first reply
    jitter_sd_tti: float | None = None
    off_grid_share: float | None = None
    n_replies: int = 0
    n_used: int = 0
    n_poll_guarded: int = 0
    clock: str | None = None  # the clock the replies were read on (StackClock.source)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _model_fit(x: np.ndarray, period: int) -> tuple[float, float, float, float]:
    """(log evidence, phase, jitter sd, off-grid share) of the grid model `period` for residues x on the 80-TTI
    cycle: the likelihood averaged over its parameters' grid (uniform priors: phase over the period, jitter and
    share over their lists), so a model pays for the freedom of its phase (pure noise fits some phase of an
    80-TTI grid by chance), and the parameters of its best fit."""
    n = x.size
    if period == NO_GRID:
        return -n * math.log(CYCLE_TTI), math.nan, math.nan, 1.0
    phases = np.arange(0.0, period, PHASE_STEP_TTI)
    d = np.mod(x[None, :] - phases[:, None], period)
    d = np.where(d >= period / 2, d - period, d)  # signed distance to the nearest grid position
    shifts = np.arange(-WRAPS, WRAPS + 1) * period
    best = (-math.inf, math.nan, math.nan, math.nan)
    all_ll = []
    for sd in JITTER_SD_TTI:
        z = (d[..., None] + shifts) / sd
        g = np.exp(-0.5 * z * z).sum(axis=-1) / (sd * math.sqrt(2 * math.pi))  # density of x mod P
        on_cycle = g * period / CYCLE_TTI  # each of the 80/P positions weighs P/80
        for share in OFF_GRID_SHARE:
            ll = np.log((1 - share) * on_cycle + share / CYCLE_TTI).sum(axis=1)
            all_ll.append(ll)
            j = int(np.argmax(ll))
            if ll[j] > best[0]:
                best = (float(ll[j]), float(phases[j]), sd, share)
    stacked = np.concatenate(all_ll)
    top = float(stacked.max())
    evidence = top + math.log(float(np.exp(stacked - top).mean()))
    return (evidence, *best[1:])


def grid_estimate(reply_tti: Sequence[float], sent_tti: Sequence[float] | None = None) -> GridEstimate:
    """The SR period from the probes' reply times in stack TTIs (in probing order), and their send times when
    known (for the poll guard)."""
    reply = np.asarray(reply_tti, dtype=np.float64)
    keep = np.ones(reply.size, dtype=bool)
    if sent_tti is not None and reply.size > 1:
        sent = np.asarray(sent_tti, dtype=np.float64)
        keep[1:] = sent[1:] - reply[:-1] >= POLL_GUARD_TTI
    used = reply[keep]
    out = GridEstimate(None, "undetermined", "none", "", n_replies=int(reply.size), n_used=int(used.size),
                       n_poll_guarded=int((~keep).sum()))
    if used.size < MIN_PROBES:
        out.reason = (f"{used.size} probe replies usable ({out.n_poll_guarded} sent within {POLL_GUARD_TTI} stack TTIs "
                      f"of the previous reply left out): at least {MIN_PROBES} needed, no answer")
        return out
    x = np.mod(used - used[0], CYCLE_TTI)
    fits = {m: _model_fit(x, m) for m in MODELS}
    out.log_evidence = {str(m): round(f[0], 3) for m, f in fits.items()}
    ranked = sorted(MODELS, key=lambda m: fits[m][0], reverse=True)
    best, second = ranked[0], ranked[1]
    margin = fits[best][0] - fits[second][0]
    out.best_model, out.margin_nats = best, round(margin, 3)
    out.phase_tti, out.jitter_sd_tti, out.off_grid_share = (None if math.isnan(v) else round(v, 3)
                                                            for v in fits[best][1:])
    if best in (NO_GRID, EVERY_TTI):
        if margin >= NAME_NATS:
            out.regime = "not-sr-limited"
            out.reason = ("the replies lie on no SR grid (" + ("every TTI" if best == EVERY_TTI else "none at all")
                          + "): no period")
        else:
            out.candidates_tti = [p for p in PERIODS_TTI if fits[p][0] >= fits[best][0] - NAME_NATS]
            out.ambiguous = bool(out.candidates_tti)
            out.reason = "the replies fit no SR grid clearly better than none: no answer"
        return out
    out.regime = "sr-limited"
    if margin < NAME_NATS:
        out.ambiguous = True
        out.candidates_tti = [p for p in PERIODS_TTI if fits[p][0] >= fits[best][0] - NAME_NATS]
        out.reason = (f"the replies fit the grids of {', '.join(map(str, out.candidates_tti))} TTIs within "
                      f"{NAME_NATS:g} nats ({second if second > 1 else 'no grid'} is {margin:.1f} behind the best): "
                      "no answer")
        return out
    out.period_tti = best
    out.confidence = "high" if margin >= HIGH_NATS else "medium"
    out.reason = (f"every reply lands on a grid of {best} stack TTIs (off it: {out.off_grid_share:.0%}); "
                  f"{margin:.1f} nats ahead of the next model")
    return out


def _unread(reason: str) -> GridEstimate:
    return GridEstimate(None, "undetermined", "none", reason)


def ue_clock(clock: StackClock) -> StackClock:
    """The clock the UE's own events are on. A broker records both directions; the UE's PHY reads downlink samples
    ahead of processing them and sends its uplink samples when it has processed them, so an SR and a reply handed to
    its tun follow the uplink record (measured on srsran-zmq: SR 10 replies within 0.2 TTI of one grid on it, drifting
    3-4 TTIs over a run on the downlink one). The run's clock from a file with an uplink sibling of the same run: that
    sibling; any other clock (the wall clock, one direction only): itself. CellabError when the sibling is unusable."""
    path = getattr(clock, "path", None)
    if clock.source == "wall" or path is None or path.name == CLOCK_FILES["ul"]:
        return clock
    sibling = path.with_name(CLOCK_FILES["ul"])
    if not sibling.exists():
        return clock
    return StackClock.from_file(sibling, expect_run_id=clock.header.get("run_id"))


def estimate_on_clock(summary: dict[str, Any], clock: Any) -> GridEstimate | None:
    """The grid estimate of a probe summary's SR probes on a StackClock (cellab.labs.clock); None when the probe
    ran no SR probes."""
    probes = summary.get("uplink_probes") or {}
    if not probes.get("requested"):
        return None
    wall_ns, rtt_ms = probes.get("reply_wall_ns"), probes.get("rtt_ms")
    if not wall_ns or not rtt_ms or len(wall_ns) != len(rtt_ms):
        return _unread("the probe summary has no reply times (uplink_probes.reply_wall_ns): this cellab-probe "
                       "predates stack time")
    reply_s = np.asarray(wall_ns, dtype=np.float64) / 1e9
    sent_s = reply_s - np.asarray(rtt_ms, dtype=np.float64) / 1e3
    try:
        clock = ue_clock(clock)
    except CellabError as exc:
        return _unread(f"the uplink stack clock is unusable: {exc}")
    if clock.source != "wall":
        first, last = clock.wall_at(clock.first_tti + 1), clock.wall_at(clock.first_tti + clock.ttis)
        if clock.ttis < 2 or first > sent_s.min() or last < reply_s.max():
            return _unread(f"the stack clock ({clock.source}, {clock.ttis} TTIs) does not span the SR probes "
                           f"(the clock {first:.3f}-{last:.3f} s, the probes {sent_s.min():.3f}-{reply_s.max():.3f} s "
                           "epoch): no answer")
    est = grid_estimate([clock.tti_at(t) for t in reply_s], [clock.tti_at(t) for t in sent_s])
    est.clock = clock.source
    return est


def sr_metrics_on_clock(summary: dict[str, Any], clock: Any) -> dict[str, Any]:
    """The run metrics' SR fields read on the run's clock (entry point `cellab.services: sr_on_clock`): `sr_clock`
    (wall | stack) and the grid's view `sr_grid`; on a stack clock also the estimate itself (sr_estimate_ms None:
    no answer), replacing the probe's wall-clock one."""
    est = estimate_on_clock(summary, clock)
    if est is None:
        return {}
    out: dict[str, Any] = {"sr_grid": est.as_dict() | {"clock": est.clock or clock.source}}
    if clock.source == "wall" or not (summary.get("uplink_probes") or {}).get("reply_wall_ns"):
        return out | {"sr_clock": "wall"}  # the probe's own estimate is read on the wall clock
    regime = {"sr-limited": "sr-limited", "not-sr-limited": "not-sr-limited"}.get(est.regime, "unknown")
    return out | {"sr_clock": "stack", "sr_regime": regime, "sr_confidence": est.confidence,
                  "sr_estimate_ms": float(est.period_tti) if est.period_tti else None,
                  "sr_estimate_source": "stack-grid" if est.period_tti else None,
                  "sr_ambiguous": est.ambiguous,
                  "sr_candidates_ms": [float(c) for c in est.candidates_tti] or None}
