"""First code of every sandboxed process: set the limits, arm the audit hook, start the role.

Runs as ``python -I -S -B bootstrap.py CONFIG_JSON`` inside the sandbox (standard library only).
The OS boundary (namespaces, read-only root, the sandbox user) is already in place; this adds the
resource limits and, as defence in depth, an audit hook that refuses sockets, starting programs,
foreign-function calls and writes outside the working directory. Roles: ``run`` executes
``main.py``; ``serve`` and ``judge`` start ``serve.py`` / ``judge.py`` from the same folder.
"""

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


def set_limits(cfg):
    cpu, mem = int(cfg["cpu_s"]), int(cfg["memory_mb"]) * 1024 * 1024
    fsize = int(cfg["max_file_mb"]) * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu + 1))
    resource.setrlimit(resource.RLIMIT_AS, (mem, mem))
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
    resource.setrlimit(resource.RLIMIT_NOFILE, (int(cfg["max_open_files"]),) * 2)
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    resource.setrlimit(resource.RLIMIT_NPROC, (int(cfg["nproc"]),) * 2)


def make_hook(workdir, allow_network):
    real_workdir = os.path.realpath(workdir)

    def inside(path):
        if isinstance(path, int):
            return True  # an already-open descriptor
        full = os.path.realpath(os.fsdecode(path))
        return full == real_workdir or full.startswith(real_workdir + os.sep)

    def deny(what):
        sys.stderr.write(f"{VIOLATION_PREFIX} {what}\n")
        sys.stderr.flush()
        raise SandboxViolation(f"sandbox: {what}")

    def hook(event, args):
        if event == "open":
            path, mode, flags = (tuple(args) + (None, None, None))[:3]
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


def main():
    cfg = json.loads(sys.argv[1])
    box, work = cfg["box"], cfg["work"]
    files = os.path.join(box, "files")
    if os.path.isdir(files):  # inputs become writable copies in the working directory
        import shutil  # only then: it imports the compression modules

        shutil.copytree(files, work, dirs_exist_ok=True)
    os.chdir(work)
    os.umask(0o077)
    set_limits(cfg)
    sys.path[:] = [box, *sys.path]
    sys.argv = ["main.py"]
    role = cfg["role"]
    if role == "run":
        with open(os.path.join(box, "main.py"), encoding="utf-8") as fh:
            code = compile(fh.read(), "main.py", "exec")
    else:
        role_module = __import__(role)  # serve.py or judge.py, imported before the hook is armed
    if cfg["audit_hook"]:
        sys.addaudithook(make_hook(work, bool(cfg["network"])))
    if role == "run":
        exec(code, {"__name__": "__main__", "__file__": "main.py", "__builtins__": __builtins__})
    else:
        role_module.main(cfg)


if __name__ == "__main__":
    main()
