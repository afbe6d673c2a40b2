"""Errors a person can act on: every bad input names the file, the field and the allowed values."""

from __future__ import annotations

import difflib
import re
import unicodedata
from collections.abc import Iterable
from pathlib import Path

from pydantic import BaseModel, ValidationError

from cellab import keyindex


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
            parts.append(("." if parts else "") + shown_key(item))
    return "".join(parts)


def shown_key(key: object) -> str:
    """A key as a field path shows it: plain ASCII as it is, anything else escaped (`'cu\\u200bbic'`), so an
    invisible or look-alike character in a name is seen, not rendered."""
    text = str(key)
    return text if text.isascii() and text.isprintable() else ascii(text)


def _allowed_from_ctx(err: dict) -> list[object] | None:
    ctx = err.get("ctx") or {}
    expected = ctx.get("expected")
    if isinstance(expected, str) and expected:
        # pydantic renders literals as "'a', 'b' or 'c'"
        return [e.strip().strip("'") for e in expected.replace(" or ", ", ").split(",")]
    return None


def from_validation_error(source: str | Path, exc: ValidationError, prefix: str = "",
                          model: type[BaseModel] | None = None) -> InputErrors:
    """Turn a pydantic error into lines that name the file, field path and allowed values. An unknown key
    (pydantic's extra_forbidden) names the keys its place allows, the closest one, and where else in the
    file's schema the key belongs; `model` is the validated model (default: found by the error's title among
    the files cellab reads, registered in cellab.keyindex)."""
    errors = []
    found = [(_clean_loc(err), err) for err in exc.errors()]
    for loc, err in found:
        if _other_branch(loc, err, found):
            continue
        if err.get("type") == "extra_forbidden" and loc:
            errors.append(_unknown_key_error(source, exc.title, model, loc, prefix))
            continue
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


# what pydantic puts in loc for a union member (`list[any]`, `dict[chain[...],...]`) or a validator; `[key]`
# marks an error in a mapping's key, which the path already ends with
_UNION_TAG = re.compile(r"^(function-[\w-]+(\[.*\])?|(list|dict|tuple|set|chain)\[.*\]|int|float|str|bool|\[key\])$")


def _clean_loc(err: dict) -> tuple[object, ...]:
    return tuple(p for p in err.get("loc", ()) if not (isinstance(p, str) and _UNION_TAG.match(p)))


def _other_branch(loc: tuple[object, ...], err: dict, found: list[tuple[tuple[object, ...], dict]]) -> bool:
    """A union member's plain type mismatch (`Input should be a valid list`) where another member of the same
    union got further: the value is of that other kind, and its own error is the one to show."""
    if not str(err.get("type", "")).endswith("_type"):
        return False
    return any(other is not err and other_loc[:len(loc)] == loc and (len(other_loc) > len(loc) or not
               str(other.get("type", "")).endswith("_type")) for other_loc, other in found)


def unknown_key(source: str | Path, field: str, key: str, allowed: Iterable[str], scope: str | None = None,
                what: str = "unknown key") -> InputError:
    """An unknown key at `field`: the allowed keys, the closest one, and where the key belongs when it is
    allowed elsewhere in the schema of `scope` ('campaign' or 'inventory'), e.g. fixed.duration_s ->
    workload.duration_s, or a run parameter of another lab."""
    allowed = sorted(allowed)
    hints = []
    close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
    if close:
        hints.append(f"did you mean {close[0]!r}?")
    if scope:
        hints += _elsewhere(scope, key, field)
    message = f"{what} {_key_text(key)}" + (": " + "; ".join(hints) if hints else "")
    return InputError(source, field, message, allowed)


def _key_text(key: object) -> str:
    """repr(key), and the first character outside printable ASCII by code point: 'cс' (a Cyrillic 'с') must
    not read as the 'cc' the allowed list shows."""
    text = str(key)
    odd = next((ch for ch in text if not (ch.isascii() and ch.isprintable())), None)
    if odd is None:
        return repr(key)
    return f"{ascii(text)} (it has {describe_char(odd)})"


def describe_char(ch: str) -> str:
    """`U+200B ZERO WIDTH SPACE`: a character as a person can tell it apart from a look-alike."""
    return f"U+{ord(ch):04X} {unicodedata.name(ch, 'control character')}"


def _elsewhere(scope: str, key: str, field: str) -> list[str]:
    """Where else `key` is allowed: other paths (at most three), the labs whose run parameter it is."""
    try:
        places = keyindex.key_locations(scope).get(key, [])
        labs = keyindex.labs_with_param(key) if scope == "campaign" else []
    except Exception:  # noqa: BLE001 - a hint must never hide the error it decorates
        return []
    here = re.sub(r"\[\d+\]", "[]", field)
    is_param = here.startswith(("fixed.", "factors."))
    others = [p for p in places if p != here and not (is_param and p.startswith("fixed."))][:3]
    hints = []
    if others:
        params = any(p.startswith("fixed.") for p in others)
        hints.append(f"{key!r} belongs at {', '.join(others)}"
                     + (" (run parameters go under fixed or factors)" if params else ""))
    if is_param and labs:
        hints.append(f"{key!r} is a run parameter of lab {', '.join(labs)}")
    return hints


def _unknown_key_error(source: str | Path, title: str, model: type[BaseModel] | None, loc: tuple[object, ...],
                       prefix: str) -> InputError:
    key = str(loc[-1])
    scope = None
    found = None
    try:
        roots = keyindex.root_models()
        if model is None and title in roots:
            model, scope = roots[title]
        elif model is not None:
            scope = next((s for m, s in roots.values() if m is model), None)
        found = keyindex.model_at(model, loc) if model is not None else None
    except Exception:  # noqa: BLE001 - a hint must never hide the error it decorates
        found = None
    if found is not None:
        loc = found[1]
    field = _field_path(loc)
    if prefix:
        field = f"{prefix}.{field}" if field else prefix
    if found is None:
        return InputError(source, field, f"unknown key {key!r} (extra inputs are not permitted)")
    return unknown_key(source, field, key, found[0].model_fields, scope)
