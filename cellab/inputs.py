"""One input layer for every file a person (or a run folder) hands cellab: bounded, decoded, parsed safely.

Every reader goes through here, so a bad file ends in one `InputError` (file, field, allowed values, one
line), never a traceback or a hang:
- `read_bytes`: regular files only (a FIFO, /dev/zero or a folder is refused without blocking), at most a
  size limit (limit + 1 bytes are read to tell).
- `read_text`: UTF-8, naming the byte offset of the first bad byte.
- `read_yaml` / `parse_yaml`: safe loading that refuses duplicate keys (naming the line), aliases beyond a
  small budget (the billion-laughs bomb is refused on the node graph, before anything expands), nesting
  deeper than `MAX_DEPTH`, and numbers that are not finite or do not fit (inf, nan, 1e308, 2**64).
- `read_json` / `parse_json`: the same guards for JSON (manifests, calibrations, plans).
- `csv_rows` / `csv_dicts`: CSV with bounded fields and rows, every row its line number; short or long
  rows are refused naming the row.
- `finite_float` / `bounded_int`: one cell of a table as a number, naming where it came from.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import stat
from pathlib import Path
from typing import Annotated, Any

import yaml

from cellab.errors import InputError, describe_char, shown_key
from cellab.pathnames import check_path

YAML_MAX_BYTES = 256 << 10  # a campaign, inventory or schedule is a few kB; pure-Python parsing takes ~1 s here
JSON_MAX_BYTES = 16 << 20
DATA_MAX_BYTES = 256 << 20  # traces, drive logs, probe logs, CSV schedules
MAX_DEPTH = 32  # nesting of mappings and sequences (a campaign needs 4)
MAX_ALIASES = 100  # alias nodes in one YAML document
MAX_EXPANDED_NODES = 100_000  # nodes the document would have with every alias expanded
MAX_FLOAT = 1e15  # larger magnitudes overflow the arithmetic done on them (dB → ratios, seconds → ns)
INT64_MAX = 2**63 - 1
CSV_MAX_FIELD = 4096  # characters in one CSV field
NUL = "\0"

Source = str | Path
INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")


# ------------------------------------------------------------------ files
def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a folder"), (stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: Source, limit_bytes: int = DATA_MAX_BYTES, field: str = "") -> bytes:
    """The file's bytes: a regular file of at most limit_bytes (opened non-blocking: a FIFO does not hang)."""
    check_path(path, path, field)  # a NUL byte or an over-long name: an InputError, not a ValueError
    path = Path(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise InputError(path, field, f"cannot read: {exc.strerror}") from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise InputError(path, field, f"is {_kind(mode)}, not a file", ["a regular file"])
        chunks, left = [], limit_bytes + 1
        while left > 0:
            chunk = os.read(fd, min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            left -= len(chunk)
    except OSError as exc:
        raise InputError(path, field, f"cannot read: {exc.strerror}") from None
    finally:
        os.close(fd)
    data = b"".join(chunks)
    if len(data) > limit_bytes:
        raise InputError(path, field, f"larger than {_size(limit_bytes)}", [f"files up to {_size(limit_bytes)}"])
    return data


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n} bytes"


def decode_text(data: bytes, source: Source, field: str = "") -> str:
    """UTF-8 text (a leading byte-order mark is dropped), or an error naming the first bad byte's offset."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(source, field, f"not UTF-8 text: byte {data[exc.start]:#04x} at byte offset {exc.start}",
                         ["UTF-8 text"]) from None
    return text.removeprefix("\ufeff")


def read_text(path: Source, limit_bytes: int = DATA_MAX_BYTES, field: str = "") -> str:
    return decode_text(read_bytes(path, limit_bytes, field), path, field)


# ------------------------------------------------------------------ values
def _field_path(parent: str, key: object) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else str(key)


def check_numbers(value: Any, source: Source, field: str = "", depth: int = 0) -> None:
    """Every float finite and within ±MAX_FLOAT, every int within 64 bits, nesting within MAX_DEPTH."""
    if depth > MAX_DEPTH:
        raise InputError(source, field, f"nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, bool):
        return
    if isinstance(value, float):
        if not math.isfinite(value):
            raise InputError(source, field or "value", f"{value} is not a finite number", ["finite numbers"])
        if abs(value) > MAX_FLOAT:
            raise InputError(source, field or "value", f"{value:g} is too large", [f"|x| ≤ {MAX_FLOAT:g}"])
    elif isinstance(value, int):
        if not -INT64_MAX - 1 <= value <= INT64_MAX:
            raise InputError(source, field or "value", f"{value} does not fit in 64 bits",
                             [f"{-INT64_MAX - 1} .. {INT64_MAX}"])
    elif isinstance(value, dict):
        for key, item in value.items():
            check_numbers(key, source, field, depth + 1)
            check_numbers(item, source, _field_path(field, key), depth + 1)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            check_numbers(item, source, _field_path(field, index), depth + 1)


def finite_float(text: object, source: Source, field: str, lo: float | None = None, hi: float | None = None) -> float:
    """One number from a table cell: finite, within [lo, hi] when given."""
    try:
        value = float(text)  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        raise InputError(source, field, f"{text!r} is not a number") from None
    if not math.isfinite(value) or abs(value) > MAX_FLOAT:
        raise InputError(source, field, f"{text!r} is not a finite number", ["finite numbers"])
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        raise InputError(source, field, f"{value:g} is out of range", [f"{lo:g} .. {hi:g}" if lo is not None
                                                                       and hi is not None else "in range"])
    return value


def bounded_int(text: object, source: Source, field: str, lo: int = -INT64_MAX - 1, hi: int = INT64_MAX) -> int:
    digits = str(text).strip()
    if not INTEGER_TEXT.fullmatch(digits):  # int() would take '1_000' and non-ASCII digits ('١٢')
        raise InputError(source, field, f"{text!r} is not an integer", ["ASCII digits 0-9, a sign first"])
    if len(digits) > 20:  # beyond 64 bits, and int() refuses texts of more than 4300 digits
        raise InputError(source, field, f"{digits[:24]}... is out of range", [f"{lo} .. {hi}"])
    value = int(digits)
    if not lo <= value <= hi:
        raise InputError(source, field, f"{value} is out of range", [f"{lo} .. {hi}"])
    return value


# ------------------------------------------------------------------ YAML
class _GuardedLoader(yaml.SafeLoader):
    """SafeLoader with a nesting limit, an alias budget and duplicate-key refusal."""

    def __init__(self, stream: str, source: Source):
        super().__init__(stream)
        self.source = source
        self.depth = 0
        self.aliases = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_ALIASES:
                line = self.peek_event().start_mark.line + 1
                raise InputError(self.source, f"line {line}", f"more than {MAX_ALIASES} YAML aliases (*name)",
                                 [f"up to {MAX_ALIASES} aliases"])
        self.depth += 1
        if self.depth > MAX_DEPTH:
            line = self.peek_event().start_mark.line + 1
            raise InputError(self.source, f"line {line}", f"nested deeper than {MAX_DEPTH} levels",
                             [f"up to {MAX_DEPTH} levels"])
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen: dict[Any, int] = {}
            for key_node, _ in node.value:
                if not isinstance(key_node, yaml.ScalarNode) or key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                line = key_node.start_mark.line + 1
                if key in seen:
                    raise InputError(self.source, f"line {line}", f"duplicate key {key!r} (first on line {seen[key]})",
                                     ["each key once per mapping"])
                seen[key] = line
        return super().construct_mapping(node, deep=deep)


# YAML 1.1 reads 1e308 (no dot) as a string, which a float field then converts: read it as the number it is
_GuardedLoader.add_implicit_resolver("tag:yaml.org,2002:float", re.compile(r"^[-+]?[0-9][0-9_]*[eE][-+]?[0-9]+$"),
                                     list("-+0123456789"))


def _expanded_nodes(node: Any, sizes: dict[int, int], open_: set[int]) -> int:
    """Nodes of the document with aliases expanded, on the composed graph (a shared node counts per use).
    Memoized, so a bomb is measured in linear time; the recursion is as deep as the nesting (≤ MAX_DEPTH)."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    if key in open_:
        raise ValueError("recursive alias")
    open_.add(key)
    total = 1 + sum(_expanded_nodes(child, sizes, open_) for child in _children(node))
    open_.discard(key)
    sizes[key] = total
    return total


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [n for pair in node.value for n in pair]
    return []


def parse_yaml(text: str, source: Source) -> Any:
    """A YAML document (one), with the guards above; an empty document is None."""
    loader = None
    try:
        loader = _GuardedLoader(text, source)  # its reader refuses control characters right here
        node = loader.get_single_node()
        if node is None:
            return None
        if loader.aliases:
            try:
                expanded = _expanded_nodes(node, {}, set())
            except ValueError:
                raise InputError(source, "", "a YAML alias refers to its own anchor") from None
            if expanded > MAX_EXPANDED_NODES:
                raise InputError(source, "", f"YAML aliases expand to {expanded} nodes",
                                 [f"up to {MAX_EXPANDED_NODES} nodes"])
        data = loader.construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        raise InputError(source, "", f"bad YAML: {where}{exc.problem or exc.context or exc}") from None
    except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
        # e.g. a timestamp that is no date (2020-13-45): the constructor's own error
        raise InputError(source, "", f"bad YAML: {exc}") from None
    except RecursionError:
        raise InputError(source, "", f"nested deeper than {MAX_DEPTH} levels") from None
    finally:
        if loader is not None:
            loader.dispose()
    check_numbers(data, source)
    return data


def read_yaml(path: Source, limit_bytes: int = YAML_MAX_BYTES) -> Any:
    """A person's YAML file: bounded, UTF-8, parsed with every guard."""
    return parse_yaml(read_text(path, limit_bytes), path)


# ------------------------------------------------------------------ JSON
def _no_constant(name: str) -> float:
    raise ValueError(f"{name} is not a finite number")


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object whose keys are all different: with a key twice, which value counts is up to the reader."""
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def parse_json(text: str | bytes, source: Source) -> Any:
    if isinstance(text, bytes):
        text = decode_text(text, source)
    try:
        data = json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_keys)
    except json.JSONDecodeError as exc:
        raise InputError(source, f"line {exc.lineno}", f"bad JSON: {exc.msg}") from None
    except _DuplicateKey as exc:
        raise InputError(source, shown_key(exc.args[0]), "duplicate key: the object names it twice",
                         ["each key once"]) from None
    except ValueError as exc:
        raise InputError(source, "", f"bad JSON: {exc}", ["finite numbers"]) from None
    except RecursionError:
        raise InputError(source, "", f"bad JSON: nested deeper than {MAX_DEPTH} levels") from None
    check_numbers(data, source)
    return data


def read_json(path: Source, limit_bytes: int = JSON_MAX_BYTES) -> Any:
    return parse_json(read_bytes(path, limit_bytes), path)


# ------------------------------------------------------------------ CSV
def csv_rows(text: str, source: Source, comment: str | None = "#") -> list[tuple[int, list[str]]]:
    """(line number, cells) of every non-empty row; rows starting with `comment` are skipped."""
    if NUL in text:
        offset = text.encode().index(NUL.encode())
        raise InputError(source, f"byte offset {offset}", "a NUL byte in a CSV file", ["text"])
    reader = csv.reader(io.StringIO(text, newline=""))
    rows: list[tuple[int, list[str]]] = []
    previous = csv.field_size_limit(CSV_MAX_FIELD)
    try:
        for row in reader:
            if not row or (comment and row[0].lstrip().startswith(comment)):
                continue
            rows.append((reader.line_num, row))
    except csv.Error as exc:
        raise InputError(source, f"row {reader.line_num}", f"not valid CSV: {exc}") from None
    finally:
        csv.field_size_limit(previous)
    return rows


def csv_dicts(text: str, source: Source, required: tuple[str, ...] = (),
              comment: str | None = "#") -> tuple[list[str], list[tuple[int, dict[str, str]]]]:
    """(header, [(line, {column: cell})]): every row as long as the header (short rows are refused)."""
    rows = csv_rows(text, source, comment)
    if not rows:
        raise InputError(source, "header", "empty file: expected a header row", [",".join(required)] or None)
    header = [h.strip() for h in rows[0][1]]
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(source, "header", f"no column {missing[0]!r}", header or None)  # the columns there are
    if len(set(header)) != len(header):
        raise InputError(source, "header", "a column name appears twice")
    out = []
    for line, cells in rows[1:]:
        if len(cells) != len(header):
            raise InputError(source, f"row {line}", f"{len(cells)} columns, the header has {len(header)}")
        out.append((line, dict(zip(header, (c.strip() for c in cells), strict=True))))
    return header, out


# ------------------------------------------------------------------ values that become identifiers or config text
# One validator per kind of value, for the rooms whose values end up in other programs' files (srsRAN,
# Open5GS, NextEPC, srsEPC) or in identifiers. Their messages never repeat the value (it may be a secret),
# and name a bad character by its code point, so an invisible or look-alike one is seen for what it is.
ASCII_DIGITS = frozenset("0123456789")
HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
NAME_FORM = "ASCII letters, digits, '_', '.', '-' (a letter or digit first)"


def text_problem(value: str, special: str = "", edges: bool = True) -> str | None:
    """What keeps `value` out of a config file's value, or None: a character that is not printable ASCII
    (line breaks, tabs, NUL, zero-width, bidirectional controls, non-ASCII look-alikes), one of `special`
    (the format's own syntax), or, with `edges`, leading/trailing blanks (the readers strip them)."""
    for ch in value:
        if not " " <= ch <= "~":
            return f"has {describe_char(ch)}"
        if ch in special:
            return f"has {ch!r}, which the file format reads as syntax"
    if edges and value != value.strip():
        return "starts or ends with a blank"
    return None


NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  # what the schema shows; name_problem is the check


def name_problem(value: object, max_len: int = 64, lead_alnum: bool = True, extra: str = "_.-") -> str | None:
    """Why `value` is not a name (an identifier people read and other programs get: levels, UEs, agents,
    keys, attenuators, inventory entries), or None. Every character outside NAME_FORM is named by its code
    point: a zero-width, bidirectional-control or Cyrillic look-alike letter would otherwise pass for Latin."""
    if not isinstance(value, str):
        return f"must be text, not {type(value).__name__}"
    for ch in value:
        if not (ch.isascii() and (ch.isalnum() or ch in extra)):
            return f"has {describe_char(ch)}"
    if not 1 <= len(value) <= max_len:
        return f"must be 1..{max_len} characters long"
    if lead_alnum and not value[0].isalnum():
        return "must start with a letter or digit"
    return None


def check_name(value: object, what: str = "name", max_len: int = 64, lead_alnum: bool = True) -> str:
    """A name (name_problem), pydantic-style: raises ValueError; wrap it for an InputError."""
    problem = name_problem(value, max_len, lead_alnum)
    if problem:
        form = NAME_FORM if lead_alnum else "ASCII letters, digits, '_', '.', '-'"
        raise ValueError(f"{what} {problem} (allowed: {form}, 1..{max_len} characters)")
    return value  # type: ignore[return-value]


def name_type(max_len: int = 64, lead_alnum: bool = True) -> Any:
    """The pydantic type of a name: checked by check_name before anything else (its message names a bad
    character); the pattern stays for the schema (`cellab schema`)."""
    from pydantic import BeforeValidator, Field

    pattern = f"^[A-Za-z0-9][A-Za-z0-9_.-]{{0,{max_len - 1}}}$" if lead_alnum else f"^[A-Za-z0-9_.-]{{1,{max_len}}}$"
    return Annotated[str, BeforeValidator(lambda v: check_name(v, "name", max_len, lead_alnum)),
                     Field(pattern=pattern)]


#: a name: a level, UE, agent, host, device, campaign or inventory (64 characters, a letter or digit first)
Name = name_type()
#: a label that may start with '_', '.' or '-' (schedules and fault plans, as campaigns have named them)
Label = name_type(lead_alnum=False)


def _serial(value: object) -> object:
    problem = name_problem(value, lead_alnum=False, extra="_.-:") if value != "" else None
    if problem:
        raise ValueError(f"serial {problem} (allowed: ASCII letters, digits, '.', '_', ':', '-', 1..64 characters, "
                         "as `adb devices` lists it)")
    return value


def serial_type() -> Any:
    """An adb serial as an inventory names it (empty: none): what the Android room's adb client accepts."""
    from pydantic import BeforeValidator, Field

    return Annotated[str, BeforeValidator(_serial), Field(pattern=r"^[A-Za-z0-9._:-]{0,64}$")]


Serial = serial_type()


def check_digits(value: str, lengths: tuple[int, ...], what: str) -> str:
    """A string of ASCII digits 0-9 of one of `lengths` (Unicode digits such as '١' or '²' are refused)."""
    if not isinstance(value, str) or len(value) not in lengths or not set(value) <= ASCII_DIGITS:
        form = " or ".join(str(n) for n in lengths)
        raise ValueError(f"{what} must be {form} ASCII digits (0-9)")
    return value


def check_imsi(value: str) -> str:
    """An IMSI as the EPCs store it: 15 ASCII digits (MCC, MNC, MSIN), surrounding blanks dropped."""
    return check_digits(value.strip() if isinstance(value, str) else value, (15,), "IMSI")


def check_hex(value: str, digits: int, what: str) -> str:
    """`digits` hex digits, lower-cased; the message never repeats the value (K and OPc are secrets)."""
    if not isinstance(value, str):
        raise ValueError(f"{what} must be {digits} hex digits")
    value = value.strip()
    if len(value) != digits or not set(value) <= HEX_DIGITS:
        raise ValueError(f"{what} must be {digits} hex digits")
    return value.lower()


def check_ip(value: str, version: int | None = None, what: str = "address") -> str:
    """An IP address in its canonical text (IPv4 dotted quad, compressed IPv6); IPv6 zone ids ('%eth0') and
    anything that is not plain ASCII are refused: the value goes into other programs' config files."""
    import ipaddress

    kind = {4: "an IPv4", 6: "an IPv6"}.get(version or 0, "an IP")
    if not isinstance(value, str) or "%" in value or text_problem(value):
        raise ValueError(f"{what} must be {kind} address, like 192.0.2.1 (no zone id, no blanks)")
    try:
        addr = ipaddress.ip_address(value)
    except ValueError:
        raise ValueError(f"{what} {value!r} is not {kind} address") from None
    if version and addr.version != version:
        raise ValueError(f"{what} {value!r} is not {kind} address")
    return str(addr)


def is_number(value: Any) -> bool:
    """A finite int or float (not a bool; an int too large for a float is no number here)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    try:
        return math.isfinite(value)
    except OverflowError:
        return False
