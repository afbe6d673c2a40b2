"""Errors a person can act on: every bad input names the file, the field and the allowed values."""

from __future__ import annotations

from pathlib import Path
from collections.abc import Iterable

from pydantic import ValidationError


class CellabError(Exception):
    """Base for errors shown to the user as one line, without a traceback."""


class InputError(CellabError):
    """A file (or command-line value) a person wrote is wrong."""

    def __init__(self, source: str | Path, field: str, message: str, allowed: Iterable[object] | None = None):
        self.source = str(source)
        self.field = field
        self.message = message
        self.allowed = list(allowed) if allowed is not None else None
        super().__init__(self.render())

    def render(self) -> str:
        text = f"{self.source}: {self.field}: {self.message}" if self.field else f"{self.source}: {self.message}"
        if self.allowed:
            text += " (allowed: " + ", ".join(str(a) for a in self.allowed) + ")"
        return text


class InputErrors(CellabError):
    """Several input errors found in one file, reported together."""

    def __init__(self, errors: list[InputError]):
        self.errors = errors
        super().__init__("\n".join(e.render() for e in errors))


def _field_path(loc: tuple[object, ...]) -> str:
    parts: list[str] = []
    for item in loc:
        if isinstance(item, int):
            parts.append(f"[{item}]")
        else:
            parts.append(("." if parts else "") + str(item))
    return "".join(parts)


def _allowed_from_ctx(err: dict) -> list[object] | None:
    ctx = err.get("ctx") or {}
    expected = ctx.get("expected")
    if isinstance(expected, str) and expected:
        # pydantic renders literals as "'a', 'b' or 'c'"
        return [e.strip().strip("'") for e in expected.replace(" or ", ", ").split(",")]
    return None


def from_validation_error(source: str | Path, exc: ValidationError, prefix: str = "") -> InputErrors:
    """Turn a pydantic error into lines that name the file, field path and allowed values."""
    errors = []
    for err in exc.errors():
        loc = tuple(err.get("loc", ()))
        # Tagged unions and function validators add internal names to loc; drop them.
        loc = tuple(p for p in loc if not (isinstance(p, str) and p.startswith("function-")))
        field = _field_path(loc)
        if prefix:
            field = f"{prefix}.{field}" if field else prefix
        allowed = _allowed_from_ctx(err)
        if err.get("type") in ("literal_error", "enum") and allowed:
            message = f"{err.get('input')!r} is not allowed"
        else:
            message = err.get("msg", "invalid").removeprefix("Value error, ")
        errors.append(InputError(source, field, message, allowed))
    return InputErrors(errors)
