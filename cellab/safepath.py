"""Output paths that are created, never followed: a command writing into a folder that someone else may have
prepared (a shared result folder, /tmp) must not write or delete through a symbolic link somewhere else.

    out = SafeDir.open(root)              # the folder the person named (links in the path they typed are theirs)
    figures = out.subdir("report")        # made, or opened with O_NOFOLLOW: a link there is refused, naming it
    figures.write("summary.json", data)   # a new file (O_CREAT|O_EXCL|O_NOFOLLOW) renamed over the name,
                                          # inside the opened folder; a link or a folder at the name is refused
    figures.remove("old.png")             # unlinks the entry itself, never what a link points to

Every operation works relative to the folder's descriptor (O_DIRECTORY|O_NOFOLLOW), so swapping a path
component for a link after the check changes nothing: the folder stays the one that was opened.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

from cellab.errors import CellabError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePathError(CellabError):
    """An output path is a symbolic link, or not the kind of entry expected there."""


def _kind(mode: int) -> str:
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISREG(mode):
        return "a file"
    return "a special file"


def check_name(name: str) -> str:
    """One path component: no separator, not . or .., no NUL, at most 255 bytes."""
    if not name or name in (".", "..") or "/" in name or "\0" in name or len(name.encode()) > 255:
        raise UnsafePathError(f"{name!r} is not a file name cellab writes (one path component)")
    return name


class SafeDir:
    """An opened output folder; files are written, listed and removed relative to its descriptor."""

    def __init__(self, fd: int, path: Path):
        self.fd = fd
        self.path = path

    @classmethod
    def open(cls, path: str | Path, *, create: bool = False) -> SafeDir:
        """The folder a person named (a link they typed is followed: it is theirs); created when asked."""
        path = Path(path)
        if create:
            path.mkdir(parents=True, exist_ok=True)
        try:
            return cls(os.open(path, _DIR_FLAGS), path)
        except NotADirectoryError:
            raise UnsafePathError(f"{path}: not a folder") from None
        except OSError as exc:
            raise CellabError(f"{path}: cannot open the folder: {exc.strerror}") from None

    def __enter__(self) -> SafeDir:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    # --- what is there ------------------------------------------------------------------------------
    def _lstat(self, name: str) -> os.stat_result | None:
        try:
            return os.stat(check_name(name), dir_fd=self.fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def _refuse(self, name: str, st: os.stat_result, wanted: str) -> UnsafePathError:
        where = self.path / name
        if stat.S_ISLNK(st.st_mode):
            try:
                target = os.readlink(name, dir_fd=self.fd)
            except OSError:
                target = "?"
            return UnsafePathError(f"{where} is a symbolic link (to {target}): cellab creates its output there and "
                                   "never writes through a link; remove the link and run again")
        return UnsafePathError(f"{where} is {_kind(st.st_mode)}, not {wanted}: remove or rename it and run again")

    def names(self) -> list[str]:
        return sorted(os.listdir(self.fd))

    def is_link(self, name: str) -> bool:
        st = self._lstat(name)
        return st is not None and stat.S_ISLNK(st.st_mode)

    def check_writable(self, name: str) -> None:
        """Refuse now, before anything is written, when `name` is a link or not a regular file."""
        st = self._lstat(name)
        if st is not None and not stat.S_ISREG(st.st_mode):
            raise self._refuse(name, st, "a file")

    # --- changes --------------------------------------------------------------------------------------
    def subdir(self, name: str, *, create: bool = True) -> SafeDir:
        """A folder inside this one, made when missing, opened without following a link."""
        check_name(name)
        if create:
            try:
                os.mkdir(name, 0o755, dir_fd=self.fd)
            except FileExistsError:
                pass
        st = self._lstat(name)
        if st is None:
            raise CellabError(f"{self.path / name}: no such folder")
        if not stat.S_ISDIR(st.st_mode):
            raise self._refuse(name, st, "a folder")
        try:
            fd = os.open(name, _DIR_FLAGS | os.O_NOFOLLOW, dir_fd=self.fd)
        except OSError as exc:  # swapped for a link or a file since the check
            raise UnsafePathError(f"{self.path / name}: cannot open as a folder without following links: "
                                  f"{exc.strerror}") from None
        return SafeDir(fd, self.path / name)

    def write(self, name: str, data: str | bytes, *, mode: int = 0o644, durable: bool = True) -> Path:
        """Write then rename within this folder: a reader sees the old file or the new one, never half, and a
        link at `name` is refused (rename would replace the link itself, never its target, even in a race).
        durable: fsync before the rename (a figure that a rebuild recreates can skip it)."""
        self.check_writable(name)
        tmp = f".{name[:200]}.{secrets.token_hex(6)}.tmp"
        fd = os.open(tmp, _NEW_FILE_FLAGS, mode, dir_fd=self.fd)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data.encode() if isinstance(data, str) else data)
                if durable:
                    fh.flush()
                    os.fsync(fh.fileno())
            os.replace(tmp, name, src_dir_fd=self.fd, dst_dir_fd=self.fd)
        except BaseException:
            try:
                os.unlink(tmp, dir_fd=self.fd)
            except OSError:
                pass
            raise
        return self.path / name

    def remove(self, name: str) -> None:
        """Remove the entry (a link is removed as a link); a folder is left alone."""
        st = self._lstat(name)
        if st is None or stat.S_ISDIR(st.st_mode):
            return
        try:
            os.unlink(name, dir_fd=self.fd)
        except FileNotFoundError:
            pass


def write_file(folder: str | Path, name: str, data: str | bytes, *, durable: bool = True) -> Path:
    """One file written safely into a folder the caller named."""
    with SafeDir.open(folder) as out:
        return out.write(name, data, durable=durable)


def _named_path(path: str | Path, field: str) -> Path:
    text = str(path)
    if not text or "\0" in text:
        raise UnsafePathError(f"{field}: {text[:80]!r} is not a path (empty, or holding a NUL byte)")
    if any(len(part.encode()) > 255 for part in Path(text).parts) or len(text.encode()) > 4095:
        raise UnsafePathError(f"{field}: {text[:80]!r}... is longer than a path may be (255 bytes a name, "
                              "4095 in all)")
    return Path(text)


def output_dir(path: str | Path, field: str) -> Path:
    """A folder a command writes into, named by the person (`--out DIR`): made with its parents when missing;
    a file, special file or a link loop there, or a folder that cannot be made, is an error naming the field."""
    with _open_output_dir(path, field) as folder:
        return folder.path


def _open_output_dir(path: str | Path, field: str) -> SafeDir:
    folder = _named_path(path, field)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise UnsafePathError(f"{field}: {folder} exists and is not a folder") from None
    except OSError as exc:
        raise UnsafePathError(f"{field}: cannot make the folder {folder}: {exc.strerror}") from None
    return SafeDir.open(folder)  # refuses what is not a folder we can open


def write_output(path: str | Path, data: str | bytes, field: str, *, mode: int = 0o644) -> Path:
    """One file a command writes where the person said (`--out FILE`): its folder made when missing, the file
    written then renamed into place; a link, a folder or a special file (a FIFO) at the name is refused,
    never written through. Errors name the field."""
    target = _named_path(path, field)
    name = target.name
    if name in ("", ".", ".."):
        raise UnsafePathError(f"{field}: {target} names a folder, not a file")
    with _open_output_dir(target.parent, field) as folder:
        try:
            return folder.write(name, data, mode=mode)
        except UnsafePathError as exc:
            raise UnsafePathError(f"{field}: {exc}") from None
        except OSError as exc:
            raise UnsafePathError(f"{field}: cannot write {target}: {exc.strerror}") from None


__all__ = ["SafeDir", "UnsafePathError", "check_name", "output_dir", "write_file", "write_output"]
