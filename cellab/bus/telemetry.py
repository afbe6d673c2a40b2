"""The controller's telemetry: a SUB that agents' PUBs connect to, read by its own thread, and the
subscribers it hands each sample to. A malformed sample is dropped and logged (rate-limited): only
samples with a valid agent name, a topic, the agent's time and a JSON object reach a subscriber."""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Callable

import zmq

from cellab.bus import wire
from cellab.bus.liveness import BG_MAX_WAIT_S
from cellab.bus.names import is_name, short
from cellab.bus.throttle import Throttle
from cellab.errors import InputError

log = logging.getLogger("cellab.bus.controller")

_TOPIC_MAX_CHARS = 256


class Telemetry:
    """Mixed into Controller."""

    endpoint: str
    _sub: zmq.Socket | None
    _subscribers: list[Callable[[str, str, dict], None]]
    _name_keys: dict[str, str]
    _closed: threading.Event
    _throttle: Throttle
    _speaks_for: Callable[[str, zmq.Frame], bool]  # auth.py

    def subscribe(self, callback: Callable[[str, str, dict], None]) -> None:
        """Call `callback(agent, topic, data)` for every telemetry sample (on the telemetry thread)."""
        if self._sub is None:
            raise InputError("controller", "telemetry_endpoint", "telemetry is off: no telemetry_endpoint given")
        self._subscribers.append(callback)

    def _telemetry_loop(self) -> None:
        assert self._sub is not None
        poller = zmq.Poller()
        poller.register(self._sub, zmq.POLLIN)
        while not self._closed.is_set():
            if not poller.poll(int(BG_MAX_WAIT_S * 1000)):
                continue
            while True:
                try:
                    msg = self._sub.recv_multipart(flags=zmq.NOBLOCK, copy=False)
                except zmq.Again:
                    break
                try:
                    self._on_telemetry(msg)
                except Exception:  # a bug of ours: keep reading
                    log.exception("failed to handle a telemetry sample",
                                  extra={"event": "controller_bug", "endpoint": self.endpoint})

    def _on_telemetry(self, msg: list[zmq.Frame]) -> None:
        try:
            if len(msg) != 2:
                raise ValueError(f"{len(msg)} frames (expected 2: header and data)")
            header = wire.decode_header(msg[0].bytes)
            agent, topic, t_s = header.get("agent"), header.get("topic"), header.get("t_s")
            if not is_name(agent):
                raise ValueError(f"agent {short(agent)} is not an agent name")
            if type(topic) is not str or len(topic) > _TOPIC_MAX_CHARS:
                raise ValueError(f"topic {short(topic)} is not a topic (a string of at most {_TOPIC_MAX_CHARS})")
            if (type(t_s) is not float and type(t_s) is not int) or not math.isfinite(t_s):
                raise ValueError(f"t_s {short(t_s)} is not a time")
            data = wire.decode_json(msg[1].bytes)
            if type(data) is not dict:
                raise ValueError(f"data {short(data)} is not a JSON object")
        except ValueError as exc:
            self._throttle.warn("bad_telemetry", "dropped a malformed telemetry sample: %s", exc,
                                event="bad_telemetry", endpoint=self.endpoint)
            return
        if self._name_keys and not self._speaks_for(agent, msg[0]):
            return
        data.setdefault("agent_time_s", t_s)  # the agent's clock; see measure_clock_offset
        for callback in list(self._subscribers):
            try:
                callback(agent, topic, data)
            except Exception:
                log.exception("telemetry subscriber failed", extra={"event": "subscriber_failed", "agent": agent})
