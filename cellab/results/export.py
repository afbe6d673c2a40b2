"""`cellab export DIR --format parquet|csv --out OUT`: a result folder's tables as files for any tool.

    OUT/runs.parquet         one row per run (cellab.results.frames: factors, status, validity, metrics, placement,
                             software)
    OUT/ue_runs.parquet      one row per run and UE
    OUT/timelines.parquet    long format: run_id, series, t_s, value, unit
    OUT/comparisons.parquet  one row per factor level and metric against the baseline
    OUT/columns.parquet      every table's columns: table, column, dtype, unit

Parquet keeps each column's type (int64, double, bool, string, timestamp UTC) and its unit in the field's
metadata (`unit`); CSV is plain text, and columns.csv says what each column is. Nothing is overwritten: a name
that exists in OUT (a file, a folder or a symbolic link) is refused before anything is written, and each file is
linked into place only if its name is still free, so a file that appears meanwhile is not replaced either.
"""

from __future__ import annotations

import io
import os
import secrets
from pathlib import Path

import pandas as pd

from cellab.errors import CellabError
from cellab.results.frames import Results, load, unit_of
from cellab.safepath import SafeDir, UnsafePathError, output_dir

FORMATS = ("parquet", "csv")
TABLES = ("runs", "ue_runs", "timelines", "comparisons")


def tables(results: Results) -> dict[str, pd.DataFrame]:
    """The tables an export writes, by name; `columns` describes the others."""
    out = {"runs": results.runs(), "ue_runs": results.ue_runs(), "timelines": results.timelines(),
           "comparisons": results.comparisons()}
    out["columns"] = pd.DataFrame(
        [{"table": name, "column": column, "dtype": str(frame[column].dtype),
          "unit": "the row's `unit`" if (name, column) == ("timelines", "value") else unit_of(column)}
         for name, frame in out.items() for column in frame.columns]).astype("string")
    return out


def export(result_dir: str | Path, out: str | Path, fmt: str) -> list[Path]:
    """Write the folder's tables into `out` (made when missing); returns the files written."""
    if fmt not in FORMATS:
        raise CellabError(f"--format {fmt!r}: not an export format (allowed: {', '.join(FORMATS)})")
    frames = tables(load(result_dir))  # a folder that is not a campaign is refused before OUT is made
    names = {f"{name}.{fmt}": frame for name, frame in frames.items()}
    with SafeDir.open(output_dir(out, "--out")) as folder:
        for name in names:
            _check_free(folder, name)
        return [_write_new(folder, name, _encode(frame, fmt)) for name, frame in names.items()]


def _encode(frame: pd.DataFrame, fmt: str) -> bytes:
    if fmt == "csv":
        return frame.to_csv(index=False, date_format="%Y-%m-%dT%H:%M:%S.%fZ").encode()
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pa.Table.from_pandas(frame, preserve_index=False)
    fields = [pa.field(f.name, pa.string() if pa.types.is_large_string(f.type) else f.type, f.nullable,
                       metadata={"unit": unit_of(f.name)} if unit_of(f.name) else None) for f in table.schema]
    table = table.cast(pa.schema(fields, metadata=table.schema.metadata))
    sink = io.BytesIO()
    pq.write_table(table, sink)
    return sink.getvalue()


def _check_free(folder: SafeDir, name: str) -> None:
    if folder.is_link(name):
        folder.check_writable(name)  # raises, naming the link and where it points
    if name in folder.names():
        raise UnsafePathError(f"{folder.path / name} exists: cellab export never overwrites; choose another --out "
                              "or remove it")


def _write_new(folder: SafeDir, name: str, data: bytes) -> Path:
    """Written under a temporary name, then linked to `name` (which fails if the name was taken meanwhile)."""
    tmp = f".{name}.{secrets.token_hex(6)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644, dir_fd=folder.fd)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        try:
            os.link(tmp, name, src_dir_fd=folder.fd, dst_dir_fd=folder.fd, follow_symlinks=False)
        except FileExistsError:
            raise UnsafePathError(f"{folder.path / name} appeared while exporting: cellab export never overwrites; "
                                  "it was left as it is") from None
    finally:
        os.unlink(tmp, dir_fd=folder.fd)
    return folder.path / name


__all__ = ["FORMATS", "TABLES", "export", "tables"]
