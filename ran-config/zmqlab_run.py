"""The srsran-zmq lab's record of a run, mixed into the lab as RunRecords: the stack's clock (the ZMQ broker's
record of when each TTI passed, per direction: broker/clock.c), its speed from the broker's stats lines
(timing_faults, stack_tti_ms), the SR configuration srsenb signalled and the eNB's own SR receptions
(ground_truth), and the run's files (collect).

The clock: configure starts a recording (`clock_start`, a run id of the lab's own: prefix, configure count, wall
ms) into the broker's folder; collect stops it (`clock_stop`: the files complete) and copies both files into the
run's folder, beside the lab's other artifacts: `stack-clock-dl.bin`, `stack-clock-ul.bin` (format:
cellab.labs.clock). stack_clock(run folder) reads the downlink one, refusing another run's (its run id). The lab
itself: zmqlab.py."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

from cellab.errors import CellabError
from cellab.labs.clock import CLOCK_FILES, StackClock

from . import logbound
from .report import effective_per_ue
from .srsue_proc import SrsueProcess, write_ue_telemetry
from .ue_events import MAX_LOG_BYTES
from .uhd_args import SAMPLE_RATE_HZ
from .zmq_broker import STATS_PERIOD_S
from .zmqlab_s1_recovery import RECOVERY_JOIN_S, RECOVERY_LOG


class RunRecords:
    """What a SrsranZmqLab (its _broker, _applied, _ues, state_dir, _enb, _core ...) records of each run."""

    _clock_run_id: str | None = None  # the recording configure started (None: none since)
    _clock_reply: dict[str, Any] | None = None  # the broker's answer to its clock_stop (TTIs written per direction)
    _clock_runs = 0

    def _clock_start(self) -> None:
        """A new recording of the stack clock from now (the broker's previous one complete on disk first)."""
        self._clock_run_id, self._clock_reply = None, None
        if self._broker is None:
            return
        RunRecords._clock_runs += 1
        run_id = f"{self.prefix}-{RunRecords._clock_runs}-{int(time.time() * 1000)}"
        folder = self.state_dir / "broker" / "clock"
        folder.mkdir(parents=True, exist_ok=True)
        for name in CLOCK_FILES.values():  # no earlier run's file can pass for this one's
            (folder / name).unlink(missing_ok=True)
        self._broker.clock_start(run_id, folder)
        self._clock_run_id = run_id

    def _collect_clock(self, run_dir: Path) -> dict[str, Path]:
        """The recording stopped and its files copied into run_dir (those there are: a missing or cut one is the
        run's stack_clock's to refuse)."""
        out: dict[str, Path] = {}
        if self._broker is None or self._clock_run_id is None:
            return out
        try:
            self._clock_reply = self._broker.clock_stop()
        except CellabError as exc:  # a broker that died: its files are what they are
            self._clock_reply = {"error": str(exc)}
        folder = self.state_dir / "broker" / "clock"
        for direction, name in CLOCK_FILES.items():
            if (folder / name).exists():
                out[f"stack-clock-{direction}"] = Path(shutil.copyfile(folder / name, run_dir / name))
        return out

    def stack_clock(self, lab_artifacts_dir: Path) -> StackClock:
        """The broker's downlink clock of this run (in the run's folder, collect's copy); InputError when it is
        missing, cut, out of order or another run's; CellabError when no recording was started."""
        if self._clock_run_id is None:
            raise CellabError("srsran-zmq lab: no stack clock was recorded for this run (the broker was not "
                              "running at configure)")
        return StackClock.from_file(Path(lab_artifacts_dir) / CLOCK_FILES["dl"], expect_run_id=self._clock_run_id)

    def timing_faults(self) -> dict[str, Any]:
        """How fast the stack ran since configure: srsenb's downlink samples through the broker against the cell's
        sample rate (1.0 = real time; over ZMQ srsRAN is clocked by its samples, so a busy host slows everything
        down instead of dropping TTIs). {} before a configure or the broker's first stats line after it."""
        msps = self._stream_msps()
        if not msps or self._applied is None:
            return {}
        nominal = SAMPLE_RATE_HZ[self._applied.n_prb] / 1e6
        mean = sum(msps) / len(msps)
        return {"stack_speed": round(mean / nominal, 3), "stack_msps": round(mean, 3), "nominal_msps": nominal,
                "stack_speed_min": round(min(msps) / nominal, 3), "stack_samples": len(msps)}

    def stack_tti_ms(self) -> float | None:
        """One TTI of the stack on the wall clock now: the cell's sample rate over what the broker moved in its
        first stats line after configure (the idle stream, as the SR probes see it before the download; waits
        for it, up to 1.5 stats periods). The UE's SR estimator's ruler, before its download's: at 6 PRB a slow
        download gave none, or bursts 4.3 ms apart for a stack at 0.7 of real time, and SR 10 was read as a
        confident 20 or 5, measured; the attach's own lines run slower (0.4-0.5) than the idle stream after it.
        None when the broker gives no line, or within 5 % of real time."""
        if self._broker is None or self._applied is None:
            return None
        deadline = time.monotonic() + 1.5 * STATS_PERIOD_S
        while not (msps := [m for m in self._stream_msps() if m > 0]) and time.monotonic() <= deadline:
            time.sleep(0.1)
        if not msps:
            return None
        speed = msps[0] / (SAMPLE_RATE_HZ[self._applied.n_prb] / 1e6)
        return None if abs(speed - 1) < 0.05 else round(min(20.0, max(0.5, 1.0 / speed)), 4)

    def _stream_msps(self) -> list[float]:
        """The downlink Msps of the broker's stats lines since configure (none before a configure), but those of
        periods the UEs heard silence (srsenb gone: an enb_restart), which measure the fault, not the stack."""
        if self._broker is None or self._applied is None:
            return []
        return [r["dl_msps"] for r in self._broker.rates() if r.get("t_s", 0.0) > self._broker_t_at
                if isinstance(r.get("dl_msps"), (int, float)) and not r.get("silent_blocks")]

    def ground_truth(self, params: dict[str, Any]) -> dict[str, Any] | None:
        """The SR configuration srsENB signalled (the last RRCConnectionSetup's sr-ConfigIndex: with several UEs
        the same period, each UE its own offset); a crash or restart since configure fails the run, naming it."""
        crash = self._crash()  # a fault's own aftermath is the recovery's to judge (fault_state)
        if crash is not None:
            raise CellabError(crash)
        st = self._enb().status()
        if st.ground_truth is None:
            return None
        truth = st.ground_truth.model_dump(exclude={"rnti"})
        local = self.state_dir / "sr_occasions.jsonl"  # the eNB's own SR receptions (its PHY log), per UE
        try:
            self._fetch_joined("enb", local.name, local)
            self._effective = effective_per_ue(local, self._configured_at_s, truth["sr_period_ms"], {
                f"ue{ue.index}": [r for r in [ue.rnti()] if r] for ue in self._ues})
        except Exception:  # noqa: BLE001 (none logged yet)
            self._effective = {}
        truth["core"] = self.core_record()  # the record names the EPC each run went through
        if self._effective:  # beside the configured period
            truth["effective"] = {n: {k: v for k, v in e.items() if k != "sr_ttis"} for n, e in self._effective.items()}
            truth["sr_effective_ms"] = self._effective.get("ue0", {}).get("period_ms")
        return truth

    def collect(self, run_dir: Path) -> dict[str, Path]:
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        recovery = self.join_s1_recovery(RECOVERY_JOIN_S)  # its events are the run's (zmqlab_s1_recovery)
        out: dict[str, Path] = self._collect_clock(run_dir)  # first: the clock ends as the workload's run ends
        for ue, offset in zip(self._ues, self._console_offsets, strict=False):
            out |= self._collect_ue(ue, offset, run_dir)
            write_ue_telemetry(ue, f"ue{ue.index}", self._configured_at_s, run_dir / "telemetry")
        if self._broker is not None and self._broker.log.exists():  # its first line and latest (middle freed)
            (run_dir / "zmq_broker.log").write_bytes(logbound.head_and_tail(self._broker.log, MAX_LOG_BYTES))
            out["zmq-broker"] = run_dir / "zmq_broker.log"
        statuses = {"enb": self._enb().status().model_dump(mode="json"),
                    "core": self._core().status().model_dump(mode="json") | {"core": self.core_record()},
                    "configure": self.last_configure,
                    "lab": {"lock_wait_s": self.lock_wait_s},
                    "broker": {"running": bool(self._broker and self._broker.running()),
                               "rates": self._broker.rates()[-5:] if self._broker else [],
                               "clock": self._clock_reply}}
        (run_dir / "lab_status.json").write_text(json.dumps(statuses, indent=1))
        events = [e for e in self._lab_events if e["t_s"] >= self._configured_at_s]
        if self._broker is not None:  # srsenb's connection lost and a new srsenb's first block, as the broker saw
            events += [{"event": f"broker_{e['event']}", "t_s": e["wall_s"], "dl_sample": e.get("dl_sample")}
                       for e in self._broker.events() if isinstance(e.get("wall_s"), (int, float))
                       and e["wall_s"] >= self._configured_at_s]
        for ue in self._ues:  # srsue's own RRC events: a radio-link failure and the way back (faults' recovery)
            events += self.rrc_events(ue)
        (run_dir / "lab_events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in sorted(
            events, key=lambda e: e["t_s"])))
        out["lab-events"] = run_dir / "lab_events.jsonl"
        if recovery is not None:
            (run_dir / RECOVERY_LOG).write_text(json.dumps(recovery, indent=1, default=str))
            out["s1-recovery"] = run_dir / RECOVERY_LOG
        if self._effective:  # the eNB's SR receptions per UE (read by ground_truth): the metrics' second truth
            (run_dir / "sr_effective.json").write_text(json.dumps(self._effective, indent=1))
            out["sr-effective"] = run_dir / "sr_effective.json"
        out["lab-status"] = run_dir / "lab_status.json"
        # the eNB agent's files (since the session began: the agent keeps them, the session removes them)
        for name in ("enb_metrics.jsonl", "sr_ground_truth.jsonl", "srsenb_console.log"):
            try:
                out[name.split(".")[0].replace("_", "-")] = self._fetch_joined("enb", name, run_dir / name)
            except Exception:  # noqa: BLE001 (not written yet: no UE reported)
                continue
        return out

    def _fetch_joined(self, role: str, name: str, dest: Path) -> Path:
        """One of an agent's files into `dest`, after its older half when it has one (NAME.1: the eNB agent keeps
        its files within the lab's bound, cellab.ran.logbound.append_bounded; the core agent its daemons' logs,
        cellab.epc.logbound); the agent's error without NAME."""
        before = dest.with_name(dest.name + ".1")
        try:
            older = self.controller.fetch_artifact(self._agent(role), name + ".1", before).read_bytes()
        except Exception:  # noqa: BLE001 (none: not rotated yet)
            older = None
        finally:
            before.unlink(missing_ok=True)
        self.controller.fetch_artifact(self._agent(role), name, dest)
        if older is not None:
            dest.write_bytes(logbound.join_older(older, dest.read_bytes()))
        return dest

    def _collect_ue(self, ue: SrsueProcess, console_offset: int, run_dir: Path) -> dict[str, Path]:
        """srsue's console since configure, its log (its segments joined) and per-second CSV (rsrp, dl_snr, mcs, rates); UE 0 under
        the names a one-UE lab always used, UE i with a `ueI_` prefix."""
        out: dict[str, Path] = {}
        prefix, key_suffix = ("", "") if ue.index == 0 else (f"ue{ue.index}_", f"-ue{ue.index}")
        if ue.console.exists():
            with open(ue.console, "rb") as src:
                src.seek(console_offset)  # the zeros of a freed middle left out
                (run_dir / f"{prefix}srsue_console.log").write_bytes(src.read().replace(b"\0", b""))
            out["srsue-console" + key_suffix] = run_dir / f"{prefix}srsue_console.log"
        if logbound.segments(ue.log):  # its segments on disk joined, oldest first: the latest N/2 bytes at least
            (run_dir / f"{prefix}{ue.log.name}").write_bytes(logbound.read_all(ue.log, MAX_LOG_BYTES))
            out["srsue-log" + key_suffix] = run_dir / f"{prefix}{ue.log.name}"
        if ue.metrics.exists():  # its header and latest lines (the lab frees its middle: logbound.free_middle)
            (run_dir / f"{prefix}{ue.metrics.name}").write_bytes(logbound.head_and_tail(ue.metrics, MAX_LOG_BYTES))
            out["srsue-metrics" + key_suffix] = run_dir / f"{prefix}{ue.metrics.name}"
        return out
