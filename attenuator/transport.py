"""Byte links the drivers talk through: serial (pyserial), TCP (telnet-style lines), HTTP GET, USB HID.

Each link turns I/O failures into AttenuatorError so callers see one error type, and a closed peer
into LinkClosed so the player can tell a disconnect from a refusal.
"""

from __future__ import annotations

import glob
import http.client
import os
import select
import socket
import stat
import termios
import time
import urllib.parse
from abc import ABC, abstractmethod
from pathlib import Path

import serial

from .driver import AttenuatorError, LinkClosed


def split_host_port(address: str, default_port: int, source: str = "address") -> tuple[str, int]:
    host, sep, port = address.rpartition(":")
    if not sep:
        return address, default_port
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise AttenuatorError(f"{source}: {address!r} is not host:port") from None


class LineLink(ABC):
    """A request/response text link: commands end with `eol_out`; replies end in CR, LF or CRLF."""

    def __init__(self, eol_out: str, timeout_s: float, encoding: str = "ascii"):
        self.eol_out = eol_out
        self.timeout_s = timeout_s
        self.encoding = encoding
        self._buf = b""

    @abstractmethod
    def _send_bytes(self, data: bytes) -> None: ...

    @abstractmethod
    def _recv_some(self, timeout_s: float) -> bytes:
        """Whatever arrived within the timeout (b'' if nothing); LinkClosed on EOF."""

    @abstractmethod
    def close(self) -> None: ...

    def send(self, line: str) -> None:
        self._send_bytes((line + self.eol_out).encode(self.encoding))

    def readline(self, timeout_s: float | None = None) -> str:
        """Next non-empty line, without its terminator."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        while True:
            for i, byte in enumerate(self._buf):
                if byte in (10, 13):
                    line, self._buf = self._buf[:i], self._buf[i + 1 :]
                    if line.strip():
                        return line.decode(self.encoding, errors="replace").strip()
                    break
            else:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AttenuatorError(f"no reply within {self.timeout_s} s")
                self._buf += self._recv_some(left)
                continue
            # an empty line was dropped: scan again without reading
            continue

    def expect(self, token: str, timeout_s: float | None = None) -> None:
        """Consume input up to and including `token` (case-insensitive): prompts end without a newline."""
        deadline = time.monotonic() + (self.timeout_s if timeout_s is None else timeout_s)
        want = token.lower().encode(self.encoding)
        while want not in self._buf.lower():
            left = deadline - time.monotonic()
            if left <= 0:
                raise AttenuatorError(f"no {token!r} within {self.timeout_s} s")
            self._buf += self._recv_some(left)
        idx = self._buf.lower().index(want) + len(want)
        self._buf = self._buf[idx:]

    def query(self, line: str) -> str:
        self.drain()
        self.send(line)
        return self.readline()

    def drain(self) -> None:
        """Drop stale input (a late reply from an earlier timeout would shift every answer)."""
        self._buf = b""
        while self._recv_some(0.0):
            pass


# pyserial raises termios.error (not an OSError) when the tty vanishes under it
_SERIAL_ERRORS = (serial.SerialException, OSError, ValueError, termios.error)


class SerialLink(LineLink):
    """pyserial port: a real /dev/ttyUSB*/ttyACM* or an emulator's pseudo-terminal."""

    def __init__(self, port: str, baudrate: int, timeout_s: float, eol_out: str = "\r"):
        super().__init__(eol_out, timeout_s)
        try:
            self._port = serial.Serial(port, baudrate=baudrate, bytesize=8, parity="N", stopbits=1, timeout=0)
        except _SERIAL_ERRORS as exc:
            raise LinkClosed(f"cannot open serial port {port}: {exc}") from exc
        self.port_name = port

    def _send_bytes(self, data: bytes) -> None:
        try:
            self._port.write(data)
            self._port.flush()
        except _SERIAL_ERRORS as exc:
            raise LinkClosed(f"serial port {self.port_name} lost: {exc}") from exc

    def _recv_some(self, timeout_s: float) -> bytes:
        try:
            fd = self._port.fileno()
            ready, _, _ = select.select([fd], [], [], max(timeout_s, 0.0))
            if not ready:
                return b""
            data = os.read(fd, 4096)
        except _SERIAL_ERRORS as exc:
            raise LinkClosed(f"serial port {self.port_name} lost: {exc}") from exc
        if not data:
            raise LinkClosed(f"serial port {self.port_name} closed")
        return data

    def close(self) -> None:
        try:
            self._port.close()
        except _SERIAL_ERRORS:
            pass


class TcpLink(LineLink):
    """Telnet-style line protocol over a raw TCP socket (the devices use no telnet option negotiation)."""

    def __init__(self, host: str, port: int, timeout_s: float, eol_out: str = "\r\n"):
        super().__init__(eol_out, timeout_s)
        self.where = f"{host}:{port}"
        try:
            self._sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            raise LinkClosed(f"cannot connect to {self.where}: {exc}") from exc
        self._sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _send_bytes(self, data: bytes) -> None:
        try:
            self._sock.sendall(data)
        except OSError as exc:
            raise LinkClosed(f"connection to {self.where} lost: {exc}") from exc

    def _recv_some(self, timeout_s: float) -> bytes:
        try:
            ready, _, _ = select.select([self._sock], [], [], max(timeout_s, 0.0))
            if not ready:
                return b""
            data = self._sock.recv(4096)
        except OSError as exc:
            raise LinkClosed(f"connection to {self.where} lost: {exc}") from exc
        if not data:
            raise LinkClosed(f"{self.where} closed the connection")
        return data

    def close(self) -> None:
        try:
            self._sock.close()
        except OSError:
            pass


class HttpLink:
    """One GET per command; the command goes in the path, the reply is the body."""

    def __init__(self, base_url: str, timeout_s: float):
        url = base_url if "://" in base_url else "http://" + base_url
        parts = urllib.parse.urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise AttenuatorError(f"address {base_url!r}: expected http://host[:port]")
        self.host, self.port = parts.hostname, parts.port or 80
        self.prefix = parts.path.rstrip("/")
        self.timeout_s = timeout_s

    def get(self, path_and_query: str) -> str:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
        try:
            conn.request("GET", self.prefix + path_and_query)
            resp = conn.getresponse()
            body = resp.read().decode("ascii", errors="replace")
        except (OSError, http.client.HTTPException) as exc:
            raise LinkClosed(f"http://{self.host}:{self.port}: {exc}") from exc
        finally:
            conn.close()
        if resp.status != 200:
            raise AttenuatorError(f"http://{self.host}:{self.port}{path_and_query}: HTTP {resp.status} {body.strip()[:80]}")
        return body.strip()

    def close(self) -> None:
        pass


HID_REPORT_BYTES = 64


class HidLink:
    """64-byte interrupt reports through Linux hidraw (report id 0 prefixed on write).

    The emulator stands in with a SOCK_SEQPACKET socket pair, which keeps report boundaries the
    way hidraw does; `from_fd` takes that end. Verified only against the emulator (no device here).
    """

    def __init__(self, fd: int, timeout_s: float, name: str):
        self._fd, self.timeout_s, self.name = fd, timeout_s, name

    @classmethod
    def open_path(cls, path: str, timeout_s: float) -> HidLink:
        try:
            # only a character device: a mistyped (or hostile) path must never get 65 bytes written into a file
            if not stat.S_ISCHR(os.stat(path).st_mode):
                raise LinkClosed(f"{path} is not a character device (expected /dev/hidrawN)")
            return cls(os.open(path, os.O_RDWR | os.O_NOCTTY), timeout_s, path)
        except OSError as exc:
            raise LinkClosed(f"cannot open {path}: {exc}") from exc

    @staticmethod
    def find(vendor_id: int, product_id: int, serial_number: str | None = None) -> str:
        """/dev/hidrawN of the first device with this VID:PID (from sysfs uevent HID_ID)."""
        want = f"{vendor_id:08X}:{product_id:08X}"
        for uevent in sorted(glob.glob("/sys/class/hidraw/hidraw*/device/uevent")):
            text = Path(uevent).read_text(errors="replace")
            ids = [ln.split("=", 1)[1] for ln in text.splitlines() if ln.startswith("HID_ID=")]
            uniq = [ln.split("=", 1)[1] for ln in text.splitlines() if ln.startswith("HID_UNIQ=")]
            if ids and ids[0].upper().endswith(want) and (serial_number is None or serial_number in uniq):
                return "/dev/" + uevent.split("/")[4]
        raise LinkClosed(f"no USB HID device {vendor_id:04x}:{product_id:04x} found under /sys/class/hidraw")

    def exchange(self, payload: bytes) -> bytes:
        if len(payload) > HID_REPORT_BYTES:
            raise AttenuatorError(f"{self.name}: command longer than one {HID_REPORT_BYTES}-byte report")
        report = b"\x00" + payload.ljust(HID_REPORT_BYTES, b"\x00")
        try:
            # drop a stale report left by an earlier timeout
            while select.select([self._fd], [], [], 0)[0]:
                if not os.read(self._fd, HID_REPORT_BYTES + 1):
                    raise LinkClosed(f"{self.name} closed")
            os.write(self._fd, report)
            ready, _, _ = select.select([self._fd], [], [], self.timeout_s)
            if not ready:
                raise AttenuatorError(f"{self.name}: no reply within {self.timeout_s} s")
            data = os.read(self._fd, HID_REPORT_BYTES + 1)
        except OSError as exc:
            raise LinkClosed(f"{self.name} lost: {exc}") from exc
        if not data:
            raise LinkClosed(f"{self.name} closed")
        return data

    def close(self) -> None:
        try:
            os.close(self._fd)
        except OSError:
            pass
