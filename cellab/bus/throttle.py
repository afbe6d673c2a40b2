"""Warnings about what peers send, at most one per kind every few seconds (a peer can send thousands)."""

from __future__ import annotations

import logging
import time
from collections.abc import Hashable

EVERY_S = 10.0


class Throttle:
    """Logs a warning for a key at most every `every_s`, with how often it happened since the last one.

    Keys come from a small set (an event name, a name and key pair): the counts never grow without bound.
    Used from several threads: a count may be off by one, which a log can live with."""

    def __init__(self, logger: logging.Logger, every_s: float = EVERY_S):
        self._log = logger
        self._every_s = every_s
        self._last: dict[Hashable, float] = {}
        self._counts: dict[Hashable, int] = {}

    def warn(self, key: Hashable, message: str, *args: object, **extra: object) -> bool:
        """Log `message % args` with `extra` unless `key` was logged within every_s; True if logged. The
        record's `count` says how often it happened since the last record of `key`."""
        count = self._counts.get(key, 0) + 1
        self._counts[key] = count
        now = time.monotonic()
        if now - self._last.get(key, -1e18) < self._every_s:
            return False
        self._last[key] = now
        self._counts[key] = 0
        self._log.warning(message, *args, extra={**extra, "count": count})
        return True
