"""Transport servers for the device emulators: pty, TCP lines, HTTP GET, HID reports.

A device model implements `handle(command) -> reply text or None` (None = no reply); the servers
split input into lines (CR, LF or CRLF), call it and write the reply with the device's terminator.
Every server runs in one daemon thread, binds 127.0.0.1 on a free port unless told otherwise and
stops within a fraction of a second.
"""

from __future__ import annotations

import errno
import http.server
import os
import random
import select
import socket
import stat
import threading
import time
import tty
import urllib.parse
from collections.abc import Callable
from pathlib import Path
from typing import Protocol


# Below Linux's ephemeral range (ip_local_port_range, 32768-60999 by default): an emulator that restarts on
# the same port (a power-cycled instrument) must not find it taken by some outgoing connection meanwhile.
STABLE_PORTS = range(20000, 32000)
REBIND_WAIT_S = 5.0


def stable_port(host: str = "127.0.0.1") -> int:
    """A free TCP port outside the ephemeral range, for a server that will be restarted on it."""
    for port in random.sample(STABLE_PORTS, 200):
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind((host, port))
            except OSError:
                continue
            return port
    raise OSError(f"no free port in {STABLE_PORTS.start}-{STABLE_PORTS.stop - 1}")


class LineDevice(Protocol):
    def handle(self, command: str) -> str | None: ...


def _split_lines(buf: bytes) -> tuple[list[str], bytes]:
    lines: list[str] = []
    start = 0
    for i, b in enumerate(buf):
        if b in (10, 13):
            text = buf[start:i].decode("ascii", errors="replace").strip()
            if text:
                lines.append(text)
            start = i + 1
    return lines, buf[start:]


class _Thread:
    def __init__(self) -> None:
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _start(self, target: Callable[[], None], name: str) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=target, name=name, daemon=True)
        self._thread.start()

    def _join(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2.0)
            self._thread = None


PTY_PREFIX = "/dev/pts/"


def check_pty_link(link: Path) -> None:
    """`link` may become the pty's link: its folder exists, and the name is free or already a link to a pty (an
    earlier emulator's); a regular file, a folder or a link elsewhere is the user's and is never replaced."""
    from cellab.errors import InputError

    allowed = ["a new name in an existing folder", "an earlier emulator's link to /dev/pts/N"]
    parent = link.parent
    if not parent.is_dir():
        raise InputError("cellab atten emulate", "--pty-link", f"{link}: the folder {parent} "
                         f"{'is not a folder' if parent.exists() else 'does not exist'}", allowed)
    try:
        mode = os.lstat(link).st_mode
    except FileNotFoundError:
        return
    except OSError as exc:
        raise InputError("cellab atten emulate", "--pty-link", f"{link}: {exc.strerror}", allowed) from None
    if stat.S_ISLNK(mode) and os.readlink(link).startswith(PTY_PREFIX):
        return
    kind = "a folder" if stat.S_ISDIR(mode) else "a symbolic link to " + os.readlink(link) if stat.S_ISLNK(mode) \
        else "a file" if stat.S_ISREG(mode) else "a special file"
    raise InputError("cellab atten emulate", "--pty-link", f"{link} exists and is {kind}; it is never replaced "
                     "or deleted", allowed)


class PtyServer(_Thread):
    """The device on a pseudo-terminal; `path` is what a serial driver opens.

    `link` (optional) is a stable symlink to the current pty, so a driver can reopen the same name
    after the emulator restarts (a new pty each time, like a USB-serial adapter replugged).
    """

    def __init__(self, device: LineDevice, eol: str = "\r\n", link: str | Path | None = None):
        super().__init__()
        self.device, self.eol = device, eol
        self.link = Path(link) if link else None
        self.path = ""
        self._master = self._slave = -1

    def start(self) -> PtyServer:
        if self.link is not None:
            check_pty_link(self.link)  # before the pty: a refused name leaves nothing open
        self._master, self._slave = os.openpty()
        tty.setraw(self._slave)  # no echo, no CR/LF translation: bytes pass as on a real UART
        self.path = os.ttyname(self._slave)
        if self.link is not None:
            # a new link under a random name beside it (symlink() never follows or replaces), renamed over a
            # missing name or an earlier emulator's pty link only (checked above)
            tmp = self.link.with_name(f".{self.link.name}.{os.getpid()}.{random.getrandbits(48):012x}")
            try:
                tmp.symlink_to(self.path)
                check_pty_link(self.link)
                os.replace(tmp, self.link)
            except BaseException:
                tmp.unlink(missing_ok=True)
                for fd in (self._master, self._slave):
                    os.close(fd)
                self._master = self._slave = -1
                raise
        self._start(self._serve, f"pty-{self.path}")
        return self

    @property
    def port(self) -> str:
        return str(self.link) if self.link is not None else self.path

    def _serve(self) -> None:
        buf = b""
        while not self._stop.is_set():
            ready, _, _ = select.select([self._master], [], [], 0.05)
            if not ready:
                continue
            try:
                data = os.read(self._master, 4096)
            except OSError:
                continue  # no slave open yet (EIO): wait for a client
            lines, buf = _split_lines(buf + data)
            for line in lines:
                reply = self.device.handle(line)
                if reply is not None:
                    try:
                        os.write(self._master, (reply + self.eol).encode("ascii"))
                    except OSError:
                        pass

    def stop(self) -> None:
        # unplugged: the link goes first, as udev removes a by-id link. A link left naming /dev/pts/N once the
        # master closes would lead a reopening driver to whatever pty the host hands out next as N, another
        # process's (two tests once did exactly that: one's safe 95 dB landed on the other's device).
        if self.link is not None and self.path:
            try:
                if os.readlink(self.link) == self.path:
                    self.link.unlink()
            except OSError:
                pass
        self._join()
        for fd in (self._master, self._slave):
            if fd >= 0:
                os.close(fd)
        self._master = self._slave = -1

    def __enter__(self) -> PtyServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class TcpLineServer(_Thread):
    """The device behind a TCP port, one thread per session.

    banner: text sent on connect. single_session: a second client gets `busy_reply` and is closed
    while the first is connected (JFW allows one telnet session). login: (user, password) prompts.
    """

    def __init__(
        self,
        device: LineDevice,
        port: int = 0,
        eol: str = "\r\n",
        banner: str | None = None,
        single_session: bool = False,
        busy_reply: str = "",
        login: tuple[str, str] | None = None,
        host: str = "127.0.0.1",
    ):
        super().__init__()
        self.device = device
        self.eol, self.banner, self.single_session, self.busy_reply = eol, banner, single_session, busy_reply
        self.login = login
        self.host, self.port = host, port
        self._sock: socket.socket | None = None
        self._sessions: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> TcpLineServer:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        # a restart on the same port (a power-cycled instrument) may find the old server's last session still
        # closing for a moment under load: wait for it as a rebooting box takes its time, then give up
        deadline = time.monotonic() + REBIND_WAIT_S
        while True:
            try:
                sock.bind((self.host, self.port))
                break
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or not self.port or time.monotonic() > deadline:
                    sock.close()
                    raise
                time.sleep(0.1)
        sock.listen(8)
        self.port = sock.getsockname()[1]
        self._sock = sock
        self._start(self._accept_loop, f"tcp-{self.port}")
        return self

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    def _accept_loop(self) -> None:
        assert self._sock is not None
        while not self._stop.is_set():
            ready, _, _ = select.select([self._sock], [], [], 0.05)
            if not ready:
                continue
            try:
                conn, _ = self._sock.accept()
            except OSError:
                continue
            with self._lock:
                busy = self.single_session and bool(self._sessions)
                if not busy:
                    self._sessions.append(conn)
            if busy:
                try:
                    if self.busy_reply:
                        conn.sendall((self.busy_reply + self.eol).encode())
                finally:
                    conn.close()
                continue
            threading.Thread(target=self._session, args=(conn,), daemon=True).start()

    def _write(self, conn: socket.socket, text: str) -> None:
        conn.sendall(text.encode("ascii", errors="replace"))

    def _session(self, conn: socket.socket) -> None:
        device = self.device
        buf = b""
        stage = 0 if self.login else 2  # 0: user prompt, 1: password prompt, 2: commands
        try:
            if self.banner:
                self._write(conn, self.banner + self.eol)
            if self.login:
                self._write(conn, "login: ")
            while not self._stop.is_set():
                ready, _, _ = select.select([conn], [], [], 0.05)
                if not ready:
                    continue
                data = conn.recv(4096)
                if not data:
                    break
                lines, buf = _split_lines(buf + data)
                for line in lines:
                    if stage == 0:
                        stage, user = 1, line
                        self._write(conn, "password: ")
                        continue
                    if stage == 1:
                        assert self.login is not None
                        if (user, line) != self.login:
                            self._write(conn, "Login incorrect" + self.eol)
                            return
                        stage = 2
                        self._write(conn, "Login successful" + self.eol)
                        continue
                    reply = device.handle(line)
                    if reply is not None:
                        self._write(conn, reply + self.eol)
        except OSError:
            pass
        finally:
            with self._lock:
                if conn in self._sessions:
                    self._sessions.remove(conn)
            conn.close()

    def stop(self) -> None:
        self._join()
        with self._lock:
            for conn in self._sessions:
                try:
                    conn.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
                conn.close()
            self._sessions.clear()
        if self._sock is not None:
            self._sock.close()
            self._sock = None

    def __enter__(self) -> TcpLineServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class HttpServer:
    """GET <target> → `route(target) -> (status, body)`, target = percent-decoded path[?query]."""

    def __init__(self, route: Callable[[str], tuple[int, str]], port: int = 0, host: str = "127.0.0.1"):
        route_fn = route

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                # Mini-Circuits puts '?' of a query command in the path (GET /:ATT?): keep it raw.
                status, body = route_fn(urllib.parse.unquote(self.path))
                data = body.encode("ascii", errors="replace")
                self.send_response(status)
                self.send_header("Content-Type", "text/plain")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._server = http.server.ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.host, self.port = host, self._server.server_address[1]
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}"

    def start(self) -> HttpServer:
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=2.0)

    def __enter__(self) -> HttpServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


class HidReportServer(_Thread):
    """Stands in for a hidraw node: a SOCK_SEQPACKET pair keeps 64-byte report boundaries.

    `handle_report(payload_without_report_id) -> 64-byte reply or None`. `client_fd` goes to HidLink.
    """

    def __init__(self, handle_report: Callable[[bytes], bytes | None]):
        super().__init__()
        self.handle_report = handle_report
        self._ours, self._theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)

    @property
    def client_fd(self) -> int:
        return self._theirs.fileno()

    def start(self) -> HidReportServer:
        self._start(self._serve, "hid-emulator")
        return self

    def _serve(self) -> None:
        while not self._stop.is_set():
            ready, _, _ = select.select([self._ours], [], [], 0.05)
            if not ready:
                continue
            try:
                report = self._ours.recv(128)
            except OSError:
                return
            if not report:
                return
            reply = self.handle_report(report[1:])  # strip hidraw's report-id byte
            if reply is not None:
                self._ours.send(reply)

    def stop(self) -> None:
        self._join()
        self._ours.close()

    def __enter__(self) -> HidReportServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
