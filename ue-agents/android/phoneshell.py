"""A virtual phone's shell: a fixed set of commands, parsed into argv (never /bin/sh).

`adb shell` sends one command line; we split it like sh would split plain words and refuse
anything that needs a real shell (`;`, `|`, `&`, redirections, `$`, backquotes). Programs that
do real work (the probe through qemu-aarch64-static, iperf3, ping, tcpdump) run from argv lists
inside the phone's UE namespace; the rest answer from the phone's recorded state.
"""

from __future__ import annotations

import os
import shlex
import shutil
import signal
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from cellab.labs.proc import argv_in

from .phones import VirtualPhone

QEMU = "qemu-aarch64-static"
SHELL_METACHARS = set(";|&<>`$(){}\n")
PROBE_PATH_PREFIX = "/data/local/tmp/"
SETTINGS_KEYS = {"airplane_mode_on", "mobile_data", "wifi_on", "stay_on_while_plugged_in"}
CC_SYSCTL = "net.ipv4.tcp_congestion_control"


@dataclass
class Execution:
    """A finished builtin (stdout/stderr/exit code) or a running process to stream."""

    stdout: bytes = b""
    stderr: bytes = b""
    code: int = 0
    proc: subprocess.Popen | None = None
    name: str = ""
    children: list = field(default_factory=list)

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _done(out: str = "", code: int = 0, err: str = "") -> Execution:
    return Execution(stdout=out.encode(), stderr=err.encode(), code=code)


def _not_found(name: str) -> Execution:
    return _done(err=f"/system/bin/sh: {name}: inaccessible or not found\n", code=127)


class PhoneShell:
    """Runs one command line for one phone; keeps the processes it started (for pkill and drops)."""

    def __init__(self, phone: VirtualPhone):
        self.phone = phone
        self.running: list[Execution] = []

    def start(self, line: str) -> Execution:
        if any(ch in SHELL_METACHARS for ch in line):
            return _done(err="virtual phone: shell operators are not supported (one command, plain words)\n",
                         code=2)
        try:
            argv = shlex.split(line)
        except ValueError as exc:
            return _done(err=f"/system/bin/sh: syntax error: {exc}\n", code=2)
        if not argv:
            return _done()
        return self._dispatch(argv, root=False)

    def kill_all(self) -> None:
        for execution in self.running:
            execution.kill()
        self.running.clear()

    # --- dispatch -------------------------------------------------------------------------------
    def _dispatch(self, argv: list[str], root: bool) -> Execution:
        name, args = argv[0], argv[1:]
        handler = getattr(self, "_cmd_" + name.replace("-", "_"), None) if name.isidentifier() else None
        if name == "su":
            return self._su(args)
        if name.startswith(PROBE_PATH_PREFIX):
            return self._program_file(name, args)
        if handler is None:
            return _not_found(name)
        return handler(args, root)

    def _su(self, args: list[str]) -> Execution:
        if not self.phone.rooted:
            return _not_found("su")
        if len(args) < 2 or args[0] not in ("0", "root"):
            return _done(err="su: usage: su 0 COMMAND [ARG...]\n", code=1)
        return self._dispatch(args[1:], root=True)

    # --- identity and settings ------------------------------------------------------------------
    def _cmd_getprop(self, args: list[str], root: bool) -> Execution:
        if not args:
            return _done(self.phone.getprop_text())
        return _done(self.phone.props().get(args[0], "") + "\n")

    def _cmd_uname(self, args: list[str], root: bool) -> Execution:
        if args == ["-r"]:
            return _done(self.phone.model.kernel + "\n")
        if args == ["-m"]:
            return _done("aarch64\n")
        return _done("Linux\n")

    def _cmd_id(self, args: list[str], root: bool) -> Execution:
        uid = 0 if root else 2000
        if args == ["-u"]:
            return _done(f"{uid}\n")
        return _done(f"uid={uid}({'root' if root else 'shell'}) gid={uid}\n")

    def _cmd_which(self, args: list[str], root: bool) -> Execution:
        known = {"getprop": "/system/bin/getprop", "dumpsys": "/system/bin/dumpsys", "ping": "/system/bin/ping"}
        if self.phone.model.iperf3:
            known["iperf3"] = "/system/bin/iperf3"
        if self.phone.rooted:
            known.update(su="/system/xbin/su", tcpdump="/system/xbin/tcpdump")
        found = [known[a] for a in args if a in known]
        return _done("".join(p + "\n" for p in found), code=0 if len(found) == len(args) and args else 1)

    def _cmd_dumpsys(self, args: list[str], root: bool) -> Execution:
        if args == ["telephony.registry"]:
            return _done(self.phone.dumpsys_registry())
        return _done(err=f"Can't find service: {' '.join(args)}\n", code=0)  # dumpsys exits 0 here

    def _cmd_settings(self, args: list[str], root: bool) -> Execution:
        st = self.phone.state
        if len(args) >= 3 and args[1] == "global" and args[2] in SETTINGS_KEYS:
            key = args[2]
            if args[0] == "get" and len(args) == 3:
                value = {"airplane_mode_on": int(st.airplane), "mobile_data": int(st.mobile_data),
                         "wifi_on": int(st.wifi), "stay_on_while_plugged_in": st.stay_awake}[key]
                return _done(f"{value}\n")
            if args[0] == "put" and len(args) == 4:
                if key == "airplane_mode_on":
                    st.airplane = args[3] == "1"  # takes effect on the broadcast / cmd below, as on Android 9
                elif key == "stay_on_while_plugged_in":
                    st.stay_awake = args[3]
                return _done()
        return _done(err="usage: settings [get|put] global KEY [VALUE]\n", code=255)

    def _cmd_cmd(self, args: list[str], root: bool) -> Execution:
        if args[:2] == ["connectivity", "airplane-mode"] and len(args) == 3 and args[2] in ("enable", "disable"):
            self.phone.set_airplane(args[2] == "enable")
            return _done()
        return _done(err=f"cmd: unsupported: {' '.join(args)}\n", code=255)

    def _cmd_am(self, args: list[str], root: bool) -> Execution:
        if args[:3] == ["broadcast", "-a", "android.intent.action.AIRPLANE_MODE"]:
            self.phone.set_airplane(self.phone.state.airplane)  # the setting put before takes effect now
            return _done("Broadcasting: Intent { act=android.intent.action.AIRPLANE_MODE }\nBroadcast completed: result=0\n")
        return _done(err="am: unsupported\n", code=255)

    def _cmd_svc(self, args: list[str], root: bool) -> Execution:
        st = self.phone.state
        if len(args) == 2 and args[0] in ("data", "wifi") and args[1] in ("enable", "disable"):
            setattr(st, "mobile_data" if args[0] == "data" else "wifi", args[1] == "enable")
            return _done()
        if len(args) == 3 and args[:2] == ["power", "stayon"] and args[2] in ("true", "false", "usb", "ac"):
            st.stay_awake = args[2]
            return _done()
        return _done(err=f"svc: unsupported: {' '.join(args)}\n", code=1)

    def _cmd_input(self, args: list[str], root: bool) -> Execution:
        if args[:1] == ["keyevent"] and len(args) == 2 and args[1] in ("KEYCODE_WAKEUP", "224", "KEYCODE_MENU", "82"):
            self.phone.state.screen_on = True
            return _done()
        return _done(err="input: unsupported\n", code=1)

    # --- files ----------------------------------------------------------------------------------
    def _paths(self, args: list[str]) -> list[Path] | Execution:
        out = []
        for arg in args:
            host = self.phone.host_path(arg)
            if host is None:
                return _done(err=f"{arg}: Permission denied\n", code=1)
            out.append(host)
        return out

    def _cmd_mkdir(self, args: list[str], root: bool) -> Execution:
        paths = self._paths([a for a in args if a != "-p"])
        if isinstance(paths, Execution):
            return paths
        for p in paths:
            p.mkdir(parents=True, exist_ok=True)
        return _done()

    def _cmd_rm(self, args: list[str], root: bool) -> Execution:
        paths = self._paths([a for a in args if a not in ("-f", "-r", "-rf")])
        if isinstance(paths, Execution):
            return paths
        for p in paths:
            if p.is_dir():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
        return _done()

    def _cmd_chmod(self, args: list[str], root: bool) -> Execution:
        if len(args) < 2 or not args[0].isdigit():
            return _done(err="chmod: usage: chmod OCTAL FILE...\n", code=1)
        paths = self._paths(args[1:])
        if isinstance(paths, Execution):
            return paths
        for p in paths:
            if not p.exists():
                return _done(err=f"chmod: {p.name}: No such file or directory\n", code=1)
            p.chmod(int(args[0], 8))
        return _done()

    def _cmd_ls(self, args: list[str], root: bool) -> Execution:
        paths = self._paths(args)
        if isinstance(paths, Execution):
            return paths
        lines = []
        for arg, p in zip(args, paths, strict=True):
            if p.is_dir():
                lines += sorted(c.name for c in p.iterdir())
            elif p.exists():
                lines.append(arg)
            else:
                return _done(err=f"ls: {arg}: No such file or directory\n", code=1)
        return _done("".join(line + "\n" for line in lines))

    # --- programs -------------------------------------------------------------------------------
    def _map_args(self, args: list[str]) -> list[str]:
        """Device paths in a program's arguments (--summary /data/local/tmp/...) → the host files."""
        out = []
        for arg in args:
            host = self.phone.host_path(arg) if arg.startswith("/") else None
            out.append(str(host) if host is not None else arg)
        return out

    def _spawn(self, argv: list[str], name: str) -> Execution:
        proc = subprocess.Popen(argv_in(self.phone.netns, argv), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        execution = Execution(proc=proc, name=name)
        self.running = [e for e in self.running if e.proc is not None and e.proc.poll() is None] + [execution]
        return execution

    def _program_file(self, path: str, args: list[str]) -> Execution:
        host = self.phone.host_path(path)
        if host is None or not host.is_file():
            return _not_found(path)
        if not os.access(host, os.X_OK):
            return _done(err=f"/system/bin/sh: {path}: can't execute: Permission denied\n", code=126)
        if shutil.which(QEMU) is None:
            return _done(err=f"virtual phone: {QEMU} is not installed on the host (Debian qemu-user-static)\n",
                         code=126)
        return self._spawn([QEMU, str(host), *self._map_args(args)], _basename(path))

    def _cmd_iperf3(self, args: list[str], root: bool) -> Execution:
        if not self.phone.model.iperf3 or shutil.which("iperf3") is None:
            return _not_found("iperf3")
        return self._spawn(["iperf3", *args], "iperf3")

    def _cmd_ping(self, args: list[str], root: bool) -> Execution:
        return self._spawn(["ping", *args], "ping")

    def _cmd_tcpdump(self, args: list[str], root: bool) -> Execution:
        if not root:
            return _done(err="tcpdump: any: You don't have permission to capture on that device\n", code=1)
        if shutil.which("tcpdump") is None:
            return _not_found("tcpdump")
        return self._spawn(["tcpdump", *self._map_args(args)], "tcpdump")

    def _cmd_sysctl(self, args: list[str], root: bool) -> Execution:
        st = self.phone.state
        if args == [CC_SYSCTL]:
            return _done(f"{CC_SYSCTL} = {st.sysctl[CC_SYSCTL]}\n")
        if len(args) == 2 and args[0] == "-w" and args[1].startswith(CC_SYSCTL + "="):
            if not root:
                return _done(err=f"sysctl: permission denied on key '{CC_SYSCTL}'\n", code=1)
            value = args[1].split("=", 1)[1]
            if self.phone.netns:  # the namespace's own setting: what the UE's TCP will use
                done = subprocess.run(argv_in(self.phone.netns, ["sysctl", "-w", f"{CC_SYSCTL}={value}"]),
                                      capture_output=True, text=True, timeout=10)
                if done.returncode != 0:
                    return _done(err=done.stderr, code=done.returncode)
            st.sysctl[CC_SYSCTL] = value
            return _done(f"{CC_SYSCTL} = {value}\n")
        return _done(err="sysctl: only net.ipv4.tcp_congestion_control on a virtual phone\n", code=1)

    def _cmd_pkill(self, args: list[str], root: bool) -> Execution:
        sigs = {"-INT": signal.SIGINT, "-TERM": signal.SIGTERM, "-KILL": signal.SIGKILL}
        if len(args) != 2 or args[0] not in sigs:
            return _done(err="pkill: usage: pkill -INT|-TERM|-KILL NAME\n", code=2)
        hits = [e for e in self.running if e.name == args[1] and e.proc is not None and e.proc.poll() is None]
        if args[1] == "tcpdump" and not root:
            return _done(err="pkill: Operation not permitted\n", code=1)
        for e in hits:
            try:
                os.killpg(e.proc.pid, sigs[args[0]])  # type: ignore[union-attr]
            except ProcessLookupError:
                pass
        return _done(code=0 if hits else 1)


def _basename(path: str) -> str:  # the program's name, as pkill matches it
    return path.rsplit("/", 1)[-1]
