"""The subscriber database: a MongoDB-wire server (MongoDB, or FerretDB from `cellab core db up`) via pymongo.

Every request has a deadline; an unreachable server is one error naming the URL. Writes are upserts keyed
by IMSI, so adding a file twice leaves one document per subscriber."""

from __future__ import annotations

from typing import Any

from pymongo import MongoClient, ReplaceOne
from pymongo.errors import ConfigurationError, InvalidURI, PyMongoError

from cellab.errors import CellabError, InputError

from .subscribers import Subscriber, document, from_document

DEFAULT_TIMEOUT_S = 5.0
DEFAULT_DB = {"nextepc": "nextepc"}  # everything else: open5gs


class DatabaseError(CellabError):
    pass


class SubscriberDb:
    def __init__(self, url: str, flavour: str = "open5gs", timeout_s: float = DEFAULT_TIMEOUT_S):
        self.url, self.flavour = url, flavour
        if not url.startswith(("mongodb://", "mongodb+srv://")):
            raise InputError("--db", "url", f"{_redact(url)} is not a MongoDB URL",
                             allowed=["mongodb://HOST[:PORT]/[DATABASE]", "mongodb+srv://..."])
        ms = int(timeout_s * 1000)
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
        except PyMongoError as exc:
            # pymongo appends its timeouts and a topology dump: keep the reason
            first = str(exc).split(" (configured timeouts")[0].split(", Timeout:")[0]
            raise DatabaseError(f"database {_redact(self.url)}: {what} failed: {first}") from None

    def check(self) -> None:
        self._run("ping", lambda: self.client.admin.command("ping"))

    def upsert(self, subscribers: list[Subscriber]) -> tuple[int, int]:
        """(inserted, updated). The server is pinged first, so an unreachable one writes nothing."""
        self.check()
        ops = [ReplaceOne({"imsi": s.imsi}, document(s, self.flavour), upsert=True) for s in subscribers]
        result = self._run("upsert", lambda: self.collection.bulk_write(ops, ordered=True))
        return result.upserted_count, result.matched_count

    def list(self) -> list[Subscriber]:
        docs = self._run("list", lambda: list(self.collection.find({}, {"_id": 0}).sort("imsi", 1)))
        return [from_document(d) for d in docs]

    def documents(self) -> list[dict[str, Any]]:
        return self._run("read", lambda: list(self.collection.find({}, {"_id": 0}).sort("imsi", 1)))

    def remove(self, imsis: list[str]) -> int:
        self.check()
        return self._run("remove", lambda: self.collection.delete_many({"imsi": {"$in": imsis}})).deleted_count


def _redact(url: str) -> str:
    """A URL as it may be shown: without a password."""
    head, sep, tail = url.partition("://")
    if "@" in tail:
        cred, _, host = tail.rpartition("@")
        user = cred.split(":")[0]
        return f"{head}{sep}{user}:***@{host}"
    return url
