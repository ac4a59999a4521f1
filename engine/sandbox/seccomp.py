"""The sandbox's system-call filter: a classic BPF program that bubblewrap installs (``--seccomp FD``).

The namespaces already take away what these calls could reach; the filter keeps the kernel code
behind them out of reach too, for native code the guest might load (an extension module written
to its ``/tmp`` runs with no audit hook). Pure Python, no library: the program is assembled here
with :func:`struct.pack`, one 8-byte ``struct sock_filter`` per instruction.

What it does, for the machine's own ABI (x86-64 or AArch64):

* any other ABI (32-bit x86 through ``int 0x80``, x32) is refused: a foreign ABI kills the
  process, x32 numbers fail with EPERM;
* :data:`DENIED` calls fail with EPERM: debugging other processes (``ptrace``,
  ``process_vm_*``, ``kcmp``, ``pidfd_getfd``), new namespaces and mounts, kernel modules, keys,
  BPF, perf, ``userfaultfd``, ``io_uring``, ``personality``, clocks, swap, reboot and the like;
* ``clone`` with a namespace flag fails with EPERM; ``clone3`` (whose flags sit behind a pointer
  a filter cannot read) fails with ENOSYS, so the C library falls back to ``clone``;
* ``ioctl`` ``TIOCSTI`` / ``TIOCLINUX`` (typing into a terminal) fail with EPERM;
* ``socket`` and ``socketpair`` fail with EPERM for every address family but :data:`LOCAL_FAMILIES`
  (``AF_UNIX``: a socket pair is a pipe, and the sandbox has no socket file of the host), and
  :data:`NETWORK_FAMILIES` too for a sandbox that shares the host's network. The network namespace
  does not isolate every family: ``AF_VSOCK`` reaches the hypervisor's host from a VM whatever the
  namespace, and netlink, packet, ``AF_ALG``, Bluetooth... are kernel code no test program needs;
* everything else is allowed.
"""

from __future__ import annotations

import errno
import platform
import struct
import sys

# struct seccomp_data: int nr; __u32 arch; __u64 instruction_pointer; __u64 args[6]
_NR, _ARCH, _ARG0, _ARG1 = 0, 4, 16, 24  # low 32-bit words on a little-endian machine

# classic BPF opcodes
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K

RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000
TERMINAL_IOCTLS = (0x5412, 0x541C)  # TIOCSTI, TIOCLINUX
LOCAL_FAMILIES = (1,)  # AF_UNIX
NETWORK_FAMILIES = (2, 10)  # AF_INET, AF_INET6: only with network=True

# name: (x86-64 number, AArch64 number or None where the call does not exist there)
DENIED = {
    "ptrace": (101, 117), "process_vm_readv": (310, 270), "process_vm_writev": (311, 271),
    "kcmp": (312, 272), "pidfd_getfd": (438, 438),
    "unshare": (272, 97), "setns": (308, 268), "mount": (165, 40), "umount2": (166, 39),
    "pivot_root": (155, 41), "chroot": (161, 51), "open_tree": (428, 428), "move_mount": (429, 429),
    "fsopen": (430, 430), "fsconfig": (431, 431), "fsmount": (432, 432), "fspick": (433, 433),
    "mount_setattr": (442, 442), "open_by_handle_at": (304, 265), "name_to_handle_at": (303, 264),
    "init_module": (175, 105), "finit_module": (313, 273), "delete_module": (176, 106),
    "kexec_load": (246, 104), "kexec_file_load": (320, 294),
    "bpf": (321, 280), "perf_event_open": (298, 241), "userfaultfd": (323, 282),
    "keyctl": (250, 219), "add_key": (248, 217), "request_key": (249, 218),
    "io_uring_setup": (425, 425), "io_uring_enter": (426, 426), "io_uring_register": (427, 427),
    "personality": (135, 92), "syslog": (103, 116), "acct": (163, 89), "quotactl": (179, 60),
    "quotactl_fd": (443, 443), "swapon": (167, 224), "swapoff": (168, 225), "reboot": (169, 142),
    "fanotify_init": (300, 262), "lookup_dcookie": (212, 18), "vhangup": (153, 58),
    "settimeofday": (164, 170), "clock_settime": (227, 112), "clock_adjtime": (305, 266),
    "adjtimex": (159, 171), "sethostname": (170, 161), "setdomainname": (171, 162),
    "memfd_secret": (447, 447), "nfsservctl": (180, 42),
    "uselib": (134, None), "iopl": (172, None), "ioperm": (173, None), "modify_ldt": (154, None),
}
CLONE = (56, 220)
CLONE3 = (435, 435)
IOCTL = (16, 29)
SOCKET_CALLS = ((41, 198), (53, 199))  # socket, socketpair: (x86-64, AArch64)


class SeccompUnsupported(RuntimeError):
    """No filter can be built for this machine (another architecture or byte order)."""


def machine() -> str:
    """The filter's name for this machine's ABI: ``x86_64`` or ``aarch64``."""
    name = platform.machine().lower()
    return {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)


def _assemble(lines: list[tuple]) -> bytes:
    """``lines`` of ``(label,)`` markers and ``(code, k, jump_true, jump_false)`` instructions, where
    a jump is a label name or ``None`` (the next instruction); returns the packed program."""
    where, count = {}, 0
    for line in lines:
        if len(line) == 1:
            where[line[0]] = count
        else:
            count += 1
    program, pc = [], 0
    for line in lines:
        if len(line) == 1:
            continue
        code, k, jt, jf = line
        offsets = []
        for target in (jt, jf):
            offset = 0 if target is None else where[target] - pc - 1
            if not 0 <= offset <= 255:
                raise ValueError(f"jump to {target!r} out of reach ({offset})")
            offsets.append(offset)
        program.append(struct.pack("=HBBI", code, offsets[0], offsets[1], k))
        pc += 1
    return b"".join(program)


def filter_program(arch: str | None = None, *, network: bool = False) -> bytes:
    """The compiled filter (``struct sock_filter[]``, native byte order) for ``arch`` (default: this
    machine); ``network`` allows the internet families (a sandbox that shares the host's network).
    Raises :class:`SeccompUnsupported` for an architecture it does not know."""
    arch = arch or machine()
    if arch not in AUDIT_ARCH or sys.byteorder != "little":
        raise SeccompUnsupported(
            f"no system-call filter for {arch} ({sys.byteorder}-endian): the sandbox supports x86_64 and aarch64")
    column = 0 if arch == "x86_64" else 1
    families = LOCAL_FAMILIES + (NETWORK_FAMILIES if network else ())
    lines: list[tuple] = [
        (_LD_ABS, _ARCH, None, None),
        (_JEQ, AUDIT_ARCH[arch], None, "kill"),
        (_LD_ABS, _NR, None, None),
    ]
    if arch == "x86_64":
        lines.append((_JGE, X32_SYSCALL_BIT, "eperm", None))
    numbers = sorted({n for n in (entry[column] for entry in DENIED.values()) if n is not None})
    lines += [(_JEQ, number, "eperm", None) for number in numbers]
    lines += [
        (_JEQ, CLONE3[column], "enosys", None),
        (_JEQ, CLONE[column], "clone", None),
        (_JEQ, IOCTL[column], "ioctl", None),
        *[(_JEQ, numbers[column], "socket", None) for numbers in SOCKET_CALLS],
        (_RET, RET_ALLOW, None, None),
        ("clone",),
        (_LD_ABS, _ARG0, None, None),
        (_JSET, CLONE_NAMESPACES, "eperm", None),
        (_RET, RET_ALLOW, None, None),
        ("ioctl",),
        (_LD_ABS, _ARG1, None, None),
        *[(_JEQ, request, "eperm", None) for request in TERMINAL_IOCTLS],
        (_RET, RET_ALLOW, None, None),
        ("socket",),  # the address family is the first argument of both calls
        (_LD_ABS, _ARG0, None, None),
        *[(_JEQ, family, "allow", None) for family in families],
        (_RET, RET_ERRNO | errno.EPERM, None, None),
        ("allow",),
        (_RET, RET_ALLOW, None, None),
        ("eperm",),
        (_RET, RET_ERRNO | errno.EPERM, None, None),
        ("enosys",),
        (_RET, RET_ERRNO | errno.ENOSYS, None, None),
        ("kill",),
        (_RET, RET_KILL_PROCESS, None, None),
    ]
    return _assemble(lines)


def run_filter(program: bytes, nr: int, arch: int, args: tuple[int, ...] = ()) -> int:
    """What ``program`` returns for one system call (a classic-BPF interpreter for the opcodes
    above; used to check the filter without a kernel)."""
    data = struct.pack("=iIQ6Q", nr, arch, 0, *(list(args) + [0] * 6)[:6])
    code = [struct.unpack_from("=HBBI", program, i) for i in range(0, len(program), 8)]
    acc, pc = 0, 0
    while True:
        op, jt, jf, k = code[pc]
        if op == _LD_ABS:
            acc = struct.unpack_from("=I", data, k)[0]
            pc += 1
        elif op == _RET:
            return k
        elif op in (_JEQ, _JGE, _JSET):
            taken = acc == k if op == _JEQ else (acc >= k if op == _JGE else bool(acc & k))
            pc += 1 + (jt if taken else jf)
        else:
            raise ValueError(f"unknown opcode {op:#x} at {pc}")
