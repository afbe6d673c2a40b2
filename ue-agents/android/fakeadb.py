"""A fake adb server: adb's host protocol on a local port, so the unmodified `adb -P PORT` client
talks to virtual phones (see adbwire.py for the framing facts and phones.py for the phones).

Host services: host:version (answering the client's own version), host:devices[-l], host:features,
host:host-features, host-serial:S:features|get-state|get-serialno, host:transport:S / -any,
host:tport:serial:S / any (8-byte transport id). Device services after a transport: shell: (v1: raw
output, then close), shell,v2,...: (framed stdout/stderr/exit), exec:, sync: (STAT, LIST, SEND,
RECV, QUIT). A phone can be dropped (it leaves the device list and its open connections are cut)
and brought back.
"""

from __future__ import annotations

import logging
import re
import socket
import socketserver
import stat
import struct
import subprocess
import threading
import time

from . import adbwire as w
from .phones import VirtualPhone
from .phoneshell import Execution, PhoneShell

log = logging.getLogger("cellab.ue.android.fakeadb")
DEFAULT_ADB_VERSION = 41


def client_adb_version(adb: str = "adb") -> int:
    """The protocol version of the installed client ("Android Debug Bridge version 1.0.41" → 41)."""
    try:
        out = subprocess.run([adb, "version"], capture_output=True, text=True, timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired):
        return DEFAULT_ADB_VERSION
    match = re.search(r"version 1\.0\.(\d+)", out)
    return int(match.group(1)) if match else DEFAULT_ADB_VERSION


class FakeAdbServer:
    def __init__(self, port: int = 0, *, version: int | None = None, host: str = "127.0.0.1"):
        self.version = client_adb_version() if version is None else version
        self.phones: dict[str, VirtualPhone] = {}
        self.shells: dict[str, PhoneShell] = {}
        self._conns: dict[str, set[socket.socket]] = {}
        self._lock = threading.Lock()
        self._next_tid = 1
        self.requests: list[str] = []  # every service asked for, for tests and debugging
        server = self

        class Handler(socketserver.BaseRequestHandler):
            def handle(self) -> None:
                server._serve(self.request)

        class Server(socketserver.ThreadingTCPServer):
            daemon_threads = True
            allow_reuse_address = True

        self._server = Server((host, port), Handler)
        self.port = self._server.server_address[1]
        self._thread: threading.Thread | None = None

    # --- lifecycle ------------------------------------------------------------------------------
    def start(self) -> FakeAdbServer:
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-adb", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        for serial in list(self.phones):
            self._cut(serial)

    def __enter__(self) -> FakeAdbServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- phones ---------------------------------------------------------------------------------
    def add_phone(self, phone: VirtualPhone) -> VirtualPhone:
        with self._lock:
            phone.transport_id = self._next_tid
            self._next_tid += 1
            self.phones[phone.serial] = phone
            self.shells[phone.serial] = PhoneShell(phone)
            self._conns[phone.serial] = set()
        return phone

    def drop(self, serial: str) -> None:
        """The phone disappears (cable pulled): off the device list, its open streams cut."""
        self.phones[serial].online = False
        self._cut(serial)

    def restore(self, serial: str) -> None:
        phone = self.phones[serial]
        with self._lock:
            phone.transport_id = self._next_tid  # a re-enumerated device gets a new transport id
            self._next_tid += 1
        phone.online = True

    def _cut(self, serial: str) -> None:
        self.shells[serial].kill_all()
        with self._lock:
            conns = list(self._conns.get(serial, ()))
        for conn in conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def _online(self) -> list[VirtualPhone]:
        return [p for p in self.phones.values() if p.online]

    def _find(self, serial: str | None) -> VirtualPhone | str:
        if serial is None:
            online = self._online()
            if not online:
                return "no devices/emulators found"
            if len(online) > 1:
                return "more than one device/emulator"
            return online[0]
        phone = self.phones.get(serial)
        if phone is None or not phone.online:
            return f"device '{serial}' not found"
        return phone

    # --- host services --------------------------------------------------------------------------
    def _devices(self, long: bool) -> str:
        lines = []
        for p in self._online():
            if not long:
                lines.append(f"{p.serial}\tdevice")
                continue
            props = p.props()
            model = re.sub(r"[^A-Za-z0-9_-]", "_", props.get("ro.product.model", ""))  # adb sanitizes these
            lines.append(f"{p.serial:<22} device product:{props.get('ro.product.name', '')} model:{model} "
                         f"device:{props.get('ro.product.device', '')} transport_id:{p.transport_id}")
        return "".join(line + "\n" for line in lines)

    def _serve(self, conn: socket.socket) -> None:
        phone: VirtualPhone | None = None
        try:
            while True:
                req = w.read_request(conn)
                self.requests.append(req)
                if phone is None:
                    done, phone = self._host(conn, req)
                    if done:
                        return
                    continue
                self._device(conn, phone, req)
                return
        except (w.ClientGone, OSError) as exc:
            log.debug("connection ended: %s", exc)
        finally:
            if phone is not None:
                with self._lock:
                    self._conns.get(phone.serial, set()).discard(conn)
            try:
                conn.close()
            except OSError:
                pass

    def _host(self, conn: socket.socket, req: str) -> tuple[bool, VirtualPhone | None]:
        """One host request; returns (connection done, phone now selected for a device service)."""
        if req == "host:version":
            w.okay(conn, b"%04x" % self.version)
        elif req in ("host:devices", "host:devices-l"):
            w.okay(conn, self._devices(req.endswith("-l")))
        elif req == "host:kill":
            w.okay(conn)
        elif req == "host:host-features":
            w.okay(conn, "shell_v2,cmd")
        elif req.startswith(("host:transport", "host:tport:")):
            selector = req.split(":", 2)[2] if req.startswith("host:tport:") else req[len("host:"):]
            serial = None
            if selector.startswith("serial:"):
                serial = selector[len("serial:"):]
            elif selector.startswith("transport:"):
                serial = selector[len("transport:"):]
            elif selector not in ("any", "usb", "local", "transport-any", "transport-usb", "transport-local"):
                w.fail(conn, f"unsupported transport selector {selector!r}")
                return True, None
            found = self._find(serial)
            if isinstance(found, str):
                w.fail(conn, found)
                return True, None
            w.okay(conn)
            if req.startswith("host:tport:"):
                conn.sendall(struct.pack("<Q", found.transport_id))
            with self._lock:
                self._conns[found.serial].add(conn)
            return False, found
        else:
            match = re.fullmatch(r"host(?:-serial:(.+))?:(features|get-state|get-serialno|get-devpath)", req)
            if match is None:
                w.fail(conn, f"unknown host service {req!r}")
                return True, None
            found = self._find(match.group(1))
            if isinstance(found, str):
                w.fail(conn, found)
                return True, None
            answer = {"features": found.features(), "get-state": "device", "get-serialno": found.serial,
                      "get-devpath": "usb:1-1"}[match.group(2)]
            w.okay(conn, answer)
        return True, None

    # --- device services ------------------------------------------------------------------------
    def _device(self, conn: socket.socket, phone: VirtualPhone, req: str) -> None:
        if req.startswith("shell") and ":" in req:
            options, _, command = req.partition(":")
            v2 = "v2" in options.split(",")[1:]
            if v2 and not phone.shell_v2:
                w.fail(conn, "device does not support shell protocol v2")
                return
            self._shell(conn, phone, command, v2)
        elif req.startswith("exec:"):
            self._shell(conn, phone, req[len("exec:"):], v2=False)
        elif req == "sync:":
            w.okay(conn)
            SyncSession(conn, phone).run()
        else:
            w.fail(conn, f"unsupported device service {req.split(':', 1)[0]!r}")

    def _shell(self, conn: socket.socket, phone: VirtualPhone, command: str, v2: bool) -> None:
        w.okay(conn)
        execution = self.shells[phone.serial].start(command)
        send_lock = threading.Lock()

        def send(kind: int, data: bytes) -> None:
            with send_lock:
                conn.sendall(w.shell_packet(kind, data) if v2 else data)

        if v2:  # the client hanging up (adb killed) ends the command, as adbd does
            threading.Thread(target=_watch_client, args=(conn, execution), daemon=True).start()
        try:
            code = _pump(execution, send)
            if v2:
                send(w.SHELL_EXIT, bytes([code & 0xFF]))
        except OSError:
            execution.kill()
            return
        try:
            conn.shutdown(socket.SHUT_WR)
            conn.settimeout(2.0)
            while conn.recv(4096):  # let the client read everything before we close
                pass
        except OSError:
            pass


def _watch_client(conn: socket.socket, execution: Execution) -> None:
    try:
        while True:
            kind, _ = w.read_shell_packet(conn)
            if kind == w.SHELL_CLOSE_STDIN:
                continue
    except (w.ClientGone, OSError, struct.error):
        execution.kill()


def _pump(execution: Execution, send) -> int:
    if execution.proc is None:
        if execution.stdout:
            send(w.SHELL_STDOUT, execution.stdout)
        if execution.stderr:
            send(w.SHELL_STDERR, execution.stderr)
        return execution.code
    proc = execution.proc

    def copy(stream, kind: int) -> None:
        for chunk in iter(lambda: stream.read1(65536), b""):
            try:
                send(kind, chunk)
            except OSError:
                execution.kill()
                return

    threads = [threading.Thread(target=copy, args=(proc.stdout, w.SHELL_STDOUT), daemon=True),
               threading.Thread(target=copy, args=(proc.stderr, w.SHELL_STDERR), daemon=True)]
    for t in threads:
        t.start()
    code = proc.wait()
    for t in threads:
        t.join(5)
    return code if code >= 0 else 128 - code  # killed by a signal: the shell's 128+N


class SyncSession:
    """sync: requests until QUIT (SYNC.TXT, version 1 messages)."""

    def __init__(self, conn: socket.socket, phone: VirtualPhone):
        self.conn, self.phone = conn, phone

    def run(self) -> None:
        while True:
            tag, length = w.read_sync_header(self.conn)
            if tag == b"QUIT":
                return
            if length > 1024:
                self._fail("path too long")
                return
            path = w.recv_exact(self.conn, length).decode("utf-8", errors="replace")
            handler = {b"STAT": self._stat, b"LIST": self._list, b"SEND": self._send, b"RECV": self._recv}.get(tag)
            if handler is None:
                self._fail(f"unknown sync request {tag!r}")
                return
            if handler(path) is False:
                return

    def _fail(self, message: str) -> None:
        data = message.encode()
        self.conn.sendall(w.sync_message(b"FAIL", len(data), data))

    def _stat(self, path: str) -> None:
        host = self.phone.host_path(path)
        if path in ("/data", "/data/local", "/"):
            mode, size, mtime = stat.S_IFDIR | 0o771, 4096, int(time.time())
        elif host is None or not host.exists():
            mode = size = mtime = 0  # SYNC.TXT: a missing file stats as all zeros
        else:
            st = host.stat()
            mode, size, mtime = st.st_mode, st.st_size & 0xFFFFFFFF, int(st.st_mtime)
        self.conn.sendall(b"STAT" + struct.pack("<III", mode, size, mtime))

    def _list(self, path: str) -> None:
        host = self.phone.host_path(path)
        if host is not None and host.is_dir():
            for child in sorted(host.iterdir()):
                st = child.stat()
                name = child.name.encode()
                self.conn.sendall(b"DENT" + struct.pack("<IIII", st.st_mode, st.st_size & 0xFFFFFFFF,
                                                        int(st.st_mtime), len(name)) + name)
        self.conn.sendall(b"DONE" + bytes(16))

    def _send(self, spec: str) -> bool:
        path, _, mode_text = spec.rpartition(",")
        host = self.phone.host_path(path)
        chunks: list[bytes] = []
        while True:
            tag, value = w.read_sync_header(self.conn)
            if tag == b"DATA":
                if value > w.SYNC_DATA_MAX_BYTES:
                    self._fail("data chunk too large")
                    return False
                chunks.append(w.recv_exact(self.conn, value))
            elif tag == b"DONE":
                break
            else:
                self._fail(f"unexpected {tag!r} during SEND")
                return False
        if host is None:
            self._fail(f"couldn't create file: {path}: Permission denied")
            return False
        host.parent.mkdir(parents=True, exist_ok=True)
        tmp = host.with_name(host.name + ".partial")
        tmp.write_bytes(b"".join(chunks))
        try:
            tmp.chmod(int(mode_text) & 0o777)
        except ValueError:
            tmp.chmod(0o644)
        tmp.replace(host)
        self.conn.sendall(w.sync_message(b"OKAY", 0))
        return True

    def _recv(self, path: str) -> bool:
        host = self.phone.host_path(path)
        if host is None or not host.is_file():
            self._fail(f"remote object '{path}' does not exist")
            return False
        with open(host, "rb") as fh:
            for chunk in iter(lambda: fh.read(w.SYNC_DATA_MAX_BYTES), b""):
                self.conn.sendall(w.sync_message(b"DATA", len(chunk), chunk))
        self.conn.sendall(w.sync_message(b"DONE", 0))
        return True


