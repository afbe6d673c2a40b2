"""Data the controller fetches from agents: clock offsets (NTP's rule) and artifacts (chunked, atomic)."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from cellab.bus import wire
from cellab.bus.names import short
from cellab.bus.routing import bad_reply
from cellab.errors import InputError


class ClockOffset(BaseModel):
    """agent clock - controller clock, from the sample with the smallest round trip (NTP's rule)."""

    agent: str
    offset_s: float
    rtt_s: float
    samples: int
    measured_at_s: float  # controller wall-clock time of the chosen sample


class Transfer:
    """Mixed into Controller."""

    request: Callable[..., dict]  # routing.py
    _call: Callable[[str, str, Any, float], tuple[dict, bytes]]  # routing.py

    def measure_clock_offset(self, agent: str, samples: int = 8, timeout_s: float = 5.0) -> ClockOffset:
        if samples < 1:
            raise InputError("measure_clock_offset", "samples", f"{samples} is not a count", [">= 1"])
        best: tuple[float, float, float] | None = None  # (rtt, offset, wall time)
        for _ in range(samples):
            sent_wall = time.time()
            sent = time.perf_counter()
            reply = self.request(agent, "clock", timeout_s=timeout_s)
            rtt_s = time.perf_counter() - sent
            t_s = reply.get("t_s") if isinstance(reply, dict) else None
            if type(t_s) is not float and type(t_s) is not int:
                raise bad_reply(agent, "clock", f"the clock reply holds no time: {short(reply)}")
            # The agent read its clock at some point in the round trip; the midpoint is the best guess.
            offset_s = float(t_s) - (sent_wall + rtt_s / 2)
            if best is None or rtt_s < best[0]:
                best = (rtt_s, offset_s, sent_wall)
        assert best is not None
        return ClockOffset(agent=agent, offset_s=best[1], rtt_s=best[0], samples=samples, measured_at_s=best[2])

    def measure_clock_offsets(self, agents: list[str], samples: int = 8) -> dict[str, ClockOffset]:
        """Offsets of several agents, for a run's manifest: {name: ClockOffset.model_dump()} is JSON-able."""
        return {name: self.measure_clock_offset(name, samples) for name in agents}

    def fetch_artifact(self, agent: str, name: str, dest: Path, *, chunk_bytes: int = wire.DEFAULT_CHUNK_BYTES,
                       timeout_s: float = 30.0) -> Path:
        """Copy an artifact of `agent` to `dest` (a file, or a directory to put it in) atomically."""
        dest = Path(dest)
        if dest.is_dir():
            dest = dest / Path(name).name
        tmp = dest.with_name(f".{dest.name}.part-{os.getpid()}-{threading.get_ident()}")
        offset = 0
        try:
            with tmp.open("wb") as out:
                while True:
                    header, data = self._call(agent, "read_artifact",
                                              {"name": name, "offset_bytes": offset, "length_bytes": chunk_bytes},
                                              timeout_s)
                    meta = header.get("meta")
                    if header.get("raw") is not True or type(meta) is not dict:
                        raise bad_reply(agent, "read_artifact", f"not a raw chunk with its meta: {short(header)}")
                    out.write(data)
                    offset += len(data)
                    size = meta.get("size_bytes")
                    if meta.get("eof") or not data or (type(size) is int and offset >= size):
                        break
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, dest)
        finally:
            tmp.unlink(missing_ok=True)
        return dest
