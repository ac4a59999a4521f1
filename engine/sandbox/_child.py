"""Bootstrap of a sandboxed program: set limits, drop privileges, install guards, run ``main.py``.

This file runs as its own interpreter (``python -I -B _child.py CONFIG_JSON``) in the sandbox's
working directory and uses only the standard library. Order matters: preload modules while the
standard library is still readable, set resource limits, drop to the sandbox user (when started as
root), then install an audit hook that refuses sockets, starting other programs, foreign-function
calls and writes outside the working directory. The hook cannot be removed from Python code; the
OS-level limits (uid, rlimits, network namespace) hold even for code that escapes it.
"""

import contextlib
import json
import os
import resource
import sys

VIOLATION_PREFIX = "SANDBOX-VIOLATION:"

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_EXEC_EVENTS = ("os.exec", "os.posix_spawn", "os.spawn", "os.system", "os.startfile", "subprocess.Popen", "pty.spawn")
_PATH_WRITE_EVENTS = {
    "os.remove": (0,), "os.rmdir": (0,), "os.mkdir": (0,), "os.rename": (0, 1), "os.symlink": (1,),
    "os.link": (0, 1), "os.chmod": (0,), "os.chown": (0,), "os.truncate": (0,), "os.utime": (0,),
    "os.mkfifo": (0,), "os.mknod": (0,), "shutil.rmtree": (0,),
}


class SandboxViolation(PermissionError):
    """Raised inside the sandbox when the program tries something the sandbox forbids."""


def _set_limits(cfg: dict) -> None:
    cpu = int(cfg["cpu_s"])
    mem = int(cfg["memory_mb"]) * 1024 * 1024
    fsize = int(cfg["max_file_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(cfg["max_open_files"]),) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    nproc = int(cfg["max_processes"])
    if cfg.get("uid") is None:
        # Without a dedicated uid the count includes every process of the current user.
        nproc += _count_own_tasks()
    resource.setrlimit(resource.RLIMIT_NPROC, (nproc, nproc))


def _count_own_tasks() -> int:
    uid = os.getuid()
    count = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/status") as fh:
                fields = dict(line.split(":", 1) for line in fh if ":" in line)
        except OSError:
            continue
        if int(fields.get("Uid", "-1").split()[0]) == uid:
            count += int(fields.get("Threads", "1").strip() or 1)
    return count


def _drop_privileges(cfg: dict) -> None:
    uid = cfg.get("uid")
    if uid is None:
        return
    os.setgroups([])
    os.setgid(int(cfg["gid"]))
    os.setuid(int(uid))


def _make_hook(workdir: str, allow_network: bool):
    real_workdir = os.path.realpath(workdir)

    def inside(path) -> bool:
        if isinstance(path, int):
            return True  # an already-open descriptor
        if isinstance(path, bytes):
            path = path.decode("utf-8", "replace")
        # relative paths resolve against the current directory, wherever the program moved it
        full = os.path.realpath(os.fspath(path))
        return full == real_workdir or full.startswith(real_workdir + os.sep)

    def deny(what: str) -> None:
        sys.stderr.write(f"{VIOLATION_PREFIX} {what}\n")
        sys.stderr.flush()
        raise SandboxViolation(f"sandbox: {what}")

    def hook(event: str, args: tuple) -> None:
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
            if isinstance(path, (str, bytes)) and "environ" in os.fsdecode(path) and "/proc" in os.fsdecode(path):
                deny(f"reading process environments ({os.fsdecode(path)}) is not allowed")
            writing = (isinstance(mode, str) and any(c in mode for c in "wax+")) or (
                isinstance(flags, int) and flags & _WRITE_FLAGS
            )
            if writing and path is not None and not inside(path):
                deny(f"writing outside the working directory ({os.fsdecode(path)}) is not allowed")
            if isinstance(path, (str, bytes)) and os.path.isdir(path) and not inside(path):
                # a directory descriptor would let dir_fd= calls write relative to it
                deny(f"opening directories outside the working directory ({os.fsdecode(path)}) is not allowed")
        elif event.startswith("socket.") and not allow_network:
            deny(f"network access ({event}) is not allowed")
        elif event.startswith(_EXEC_EVENTS):
            deny(f"starting programs ({event}) is not allowed")
        elif event.startswith("ctypes."):
            deny(f"foreign function calls ({event}) are not allowed")
        elif event in _PATH_WRITE_EVENTS:
            for index in _PATH_WRITE_EVENTS[event]:
                if index < len(args) and args[index] is not None and not inside(args[index]):
                    deny(f"changing files outside the working directory ({event} {args[index]!r}) is not allowed")
        elif event == "import" and args and str(args[0]).split(".")[0] in ("ctypes", "_ctypes"):
            deny("importing ctypes is not allowed")

    return hook


def main() -> None:
    cfg = json.loads(sys.argv[1])
    workdir = cfg["workdir"]
    for name in cfg.get("preload", ()):
        with contextlib.suppress(Exception):  # a module that does not exist here is simply not preloaded
            __import__(name)
    os.chdir(workdir)
    os.umask(0o077)
    _set_limits(cfg)
    _drop_privileges(cfg)
    sys.path[:0] = [workdir]
    sys.argv = ["main.py"]
    with open(os.path.join(workdir, "main.py"), encoding="utf-8") as fh:
        source = fh.read()
    code = compile(source, "main.py", "exec")
    sys.addaudithook(_make_hook(workdir, bool(cfg.get("network"))))
    namespace = {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__}
    exec(code, namespace)


if __name__ == "__main__":
    main()
