"""The subscriber database: a MongoDB-wire server (MongoDB, or FerretDB from `cellab core db up`) via pymongo.

Every request has a deadline; an unreachable server is one error naming the URL. Writes are upserts keyed
by IMSI, so adding a file twice leaves one document per subscriber."""

from __future__ import annotations

import math
import re
from typing import Any

from pymongo import MongoClient, ReplaceOne
from pymongo.errors import BulkWriteError, ConfigurationError, InvalidURI, PyMongoError

from cellab.errors import CellabError, InputError, InputErrors

from .subscribers import StoredSubscriberError, Subscriber, document, from_document

DEFAULT_TIMEOUT_S = 5.0
MAX_TIMEOUT_S = 3600.0
DEFAULT_DB = {"nextepc": "nextepc"}  # everything else: open5gs
# a run of 32 hex digits in a server's message may be a K or OPc (pymongo quotes documents in some errors)
_SECRET_LIKE = re.compile(r"[0-9A-Fa-f]{32}")


class DatabaseError(CellabError):
    pass


class SubscriberDb:
    def __init__(self, url: str, flavour: str = "open5gs", timeout_s: float = DEFAULT_TIMEOUT_S):
        self.url, self.flavour = url, flavour
        check_timeout(timeout_s)
        if not url.startswith(("mongodb://", "mongodb+srv://")):
            raise InputError("--db", "url", f"{_redact(url)} is not a MongoDB URL",
                             allowed=["mongodb://HOST[:PORT]/[DATABASE]", "mongodb+srv://..."])
        ms = max(1, round(timeout_s * 1000))
        try:
            self.client: MongoClient = MongoClient(url, serverSelectionTimeoutMS=ms, connectTimeoutMS=ms,
                                                   socketTimeoutMS=ms, timeoutMS=ms)
            name = self.client.get_default_database(DEFAULT_DB.get(flavour, "open5gs")).name
        except (InvalidURI, ConfigurationError, ValueError) as exc:
            raise InputError("--db", "url", f"{_redact(url)}: {exc}") from None
        self.collection = self.client[name]["subscribers"]

    def __enter__(self) -> SubscriberDb:
        return self

    def __exit__(self, *exc: object) -> None:
        self.client.close()

    def _run(self, what: str, fn: Any) -> Any:
        try:
            return fn()
        except BulkWriteError as exc:
            # its text quotes the documents (K, OPc): keep the server's messages only
            errors = exc.details.get("writeErrors") or []
            reasons = "; ".join(f"write {e.get('index')}: {e.get('errmsg', 'refused')}" for e in errors[:5])
            raise DatabaseError(f"database {_redact(self.url)}: {what} failed: "
                                f"{_scrub(reasons or 'write refused')}") from None
        except PyMongoError as exc:
            # pymongo appends its timeouts and a topology dump: keep the reason
            first = str(exc).split(" (configured timeouts")[0].split(", Timeout:")[0]
            raise DatabaseError(f"database {_redact(self.url)}: {what} failed: {_scrub(first)}") from None

    def check(self) -> None:
        self._run("ping", lambda: self.client.admin.command("ping"))

    def upsert(self, subscribers: list[Subscriber], source: str = "subscribers") -> tuple[int, int]:
        """(inserted, updated). The server is pinged first, so an unreachable one writes nothing; a static IP
        another stored subscriber holds is refused before anything is written (the file's own rows are checked
        against each other when it is read; the HSS would hand both UEs one address)."""
        self.check()
        batch = {s.imsi for s in subscribers}
        held = {s.static_ip: s.imsi for s in self.list_checked()[0] if s.static_ip and s.imsi not in batch}
        clashes = [InputError(source, f"imsi {s.imsi}.static_ip", f"{s.static_ip} is the static IP of stored "
                              f"subscriber {held[s.static_ip]}: two UEs cannot share one address")
                   for s in subscribers if s.static_ip in held]
        if clashes:
            raise InputErrors(clashes)
        ops = [ReplaceOne({"imsi": s.imsi}, document(s, self.flavour), upsert=True) for s in subscribers]
        result = self._run("upsert", lambda: self.collection.bulk_write(ops, ordered=True))
        return result.upserted_count, result.matched_count

    def list(self) -> list[Subscriber]:
        """Every stored subscriber; StoredSubscribersError (fields named, no values) when one is invalid."""
        subs, problems = self.list_checked()
        if problems:
            raise StoredSubscribersError(self.url, problems)
        return subs

    def list_checked(self) -> tuple[list[Subscriber], list[StoredSubscriberError]]:
        """(valid subscribers, one error per stored document that is none): a malformed K or OPc is named,
        never shown."""
        docs = self._run("list", lambda: list(self.collection.find({}, {"_id": 0}).sort("imsi", 1)))
        subs, problems = [], []
        for doc in docs:
            try:
                subs.append(from_document(doc))
            except StoredSubscriberError as exc:
                problems.append(exc)
        return subs, problems

    def documents(self) -> list[dict[str, Any]]:
        return self._run("read", lambda: list(self.collection.find({}, {"_id": 0}).sort("imsi", 1)))

    def remove(self, imsis: list[str]) -> int:
        self.check()
        return self._run("remove", lambda: self.collection.delete_many({"imsi": {"$in": imsis}})).deleted_count


class StoredSubscribersError(DatabaseError):
    def __init__(self, url: str, problems: list[StoredSubscriberError]):
        self.problems = problems
        super().__init__(f"database {_redact(url)}: {len(problems)} stored subscribers are invalid (values not "
                         "shown):\n" + "\n".join(str(p) for p in problems))


def check_timeout(timeout_s: float, option: str = "--timeout-s") -> float:
    """A request timeout: finite, above 0, at most MAX_TIMEOUT_S (NaN, inf, 0 and negatives are refused
    here, naming the option, not as a database error)."""
    try:
        value = float(timeout_s)
    except (TypeError, ValueError):
        value = math.nan
    if not math.isfinite(value) or not 0 < value <= MAX_TIMEOUT_S:
        raise InputError(option, "timeout", f"{timeout_s} is not a usable timeout",
                         [f"seconds, 0 < s <= {MAX_TIMEOUT_S:g}"])
    return value


def _scrub(text: str) -> str:
    return _SECRET_LIKE.sub("****", text)


def _redact(url: str) -> str:
    """A URL as it may be shown: without a password."""
    head, sep, tail = url.partition("://")
    if "@" in tail:
        cred, _, host = tail.rpartition("@")
        user = cred.split(":")[0]
        return f"{head}{sep}{user}:***@{host}"
    return url
