"""The system-call filter: its BPF program by hand (read back by a small interpreter), and the
boundary refusing code when bubblewrap does not put the filter in force."""

from __future__ import annotations

import errno
import os
import shutil
import stat
import struct
import tempfile
from pathlib import Path

import pytest

from engine.sandbox import boundary as boundary_module
from engine.sandbox.seccomp import (
    AUDIT_ARCH,
    DENIED,
    RET_ALLOW,
    RET_ERRNO,
    RET_KILL_PROCESS,
    SeccompUnsupported,
    filter_program,
    run_filter,
)

X86, ARM = AUDIT_ARCH["x86_64"], AUDIT_ARCH["aarch64"]
EPERM, ENOSYS = RET_ERRNO | errno.EPERM, RET_ERRNO | errno.ENOSYS


@pytest.mark.parametrize(("arch", "audit", "column"), [("x86_64", X86, 0), ("aarch64", ARM, 1)])
def test_each_denied_call_fails_with_eperm_and_ordinary_calls_pass(arch, audit, column):
    program = filter_program(arch)
    assert len(program) % 8 == 0 and len(program) // 8 < 256  # struct sock_filter, within one jump's reach
    for name, numbers in DENIED.items():
        if numbers[column] is not None:
            assert run_filter(program, numbers[column], audit) == EPERM, name
    # read, write, openat, mmap, getpid, exit_group, wait4 by their numbers on each machine
    ordinary = {"x86_64": (0, 1, 257, 9, 39, 231, 61), "aarch64": (63, 64, 56, 222, 172, 94, 260)}[arch]
    for number in ordinary:
        assert run_filter(program, number, audit) == RET_ALLOW, number


def test_clone_with_a_namespace_flag_clone3_and_terminal_ioctls():
    program = filter_program("x86_64")
    fork_flags = 0x01200011  # CLONE_CHILD_SETTID | CLONE_CHILD_CLEARTID | SIGCHLD: what fork() passes
    thread_flags = 0x003D0F00  # what pthread_create passes
    assert run_filter(program, 56, X86, (fork_flags,)) == RET_ALLOW
    assert run_filter(program, 56, X86, (thread_flags,)) == RET_ALLOW
    assert run_filter(program, 56, X86, (fork_flags | 0x10000000,)) == EPERM  # CLONE_NEWUSER
    assert run_filter(program, 56, X86, (fork_flags | 0x40000000,)) == EPERM  # CLONE_NEWNET
    assert run_filter(program, 435, X86) == ENOSYS  # clone3: the C library falls back to clone
    assert run_filter(program, 16, X86, (1, 0x5412)) == EPERM  # ioctl TIOCSTI
    assert run_filter(program, 16, X86, (1, 0x5401)) == RET_ALLOW  # ioctl TCGETS


# (socket, socketpair) numbers on each machine
SOCKET_CALLS = {"x86_64": (41, 53), "aarch64": (198, 199)}
AF_UNIX, AF_INET, AF_INET6, AF_NETLINK, AF_PACKET, AF_VSOCK = 1, 2, 10, 16, 17, 40


@pytest.mark.parametrize(("arch", "audit"), [("x86_64", X86), ("aarch64", ARM)])
def test_socket_families_are_denied_unless_allowed(arch, audit):
    """Only AF_UNIX without network; AF_INET and AF_INET6 too with network; never AF_VSOCK, which the
    network namespace does not isolate, nor AF_NETLINK or AF_PACKET (socket and socketpair alike)."""
    closed, shared = filter_program(arch), filter_program(arch, network=True)
    for call in SOCKET_CALLS[arch]:
        for family in range(64):
            expected = RET_ALLOW if family == AF_UNIX else EPERM
            assert run_filter(closed, call, audit, (family, 1, 0)) == expected, (call, family)
            expected = RET_ALLOW if family in (AF_UNIX, AF_INET, AF_INET6) else EPERM
            assert run_filter(shared, call, audit, (family, 1, 0)) == expected, (call, family)
        for program in (closed, shared):
            for family in (AF_VSOCK, AF_NETLINK, AF_PACKET, 0xFFFFFFFF, 1 << 16 | AF_UNIX):
                assert run_filter(program, call, audit, (family, 1, 0)) == EPERM, (call, family)


def test_other_abis_are_refused():
    program = filter_program("x86_64")
    assert run_filter(program, 0x40000000 | 39, X86) == EPERM  # x32 getpid
    assert run_filter(program, 20, 0x40000003) == RET_KILL_PROCESS  # i386 getpid through int 0x80
    assert run_filter(filter_program("aarch64"), 172, X86) == RET_KILL_PROCESS


def test_the_program_is_packed_as_the_kernel_reads_it():
    first = struct.unpack("=HBBI", filter_program("x86_64")[:8])
    assert first == (0x20, 0, 0, 4)  # load the 32-bit word at offset 4 of seccomp_data: the arch
    with pytest.raises(SeccompUnsupported, match="x86_64 and aarch64"):
        filter_program("riscv64")


def test_a_bubblewrap_that_drops_the_filter_is_refused(monkeypatch):
    """Fail closed: a bubblewrap that ignores --seccomp runs the probe unfiltered, and no code runs."""
    real = shutil.which("bwrap")
    if real is None:
        pytest.skip("bubblewrap (bwrap) is not installed")
    folder = Path(tempfile.mkdtemp(prefix="cooplab-fake-bwrap-"))
    try:
        fake = folder / "bwrap"
        fake.write_text("#!/bin/sh\n# drop --seccomp FD, keep the rest\nfor a; do shift\n"
                        "  if [ \"$skip\" = 1 ]; then skip=0; continue; fi\n"
                        "  if [ \"$a\" = --seccomp ]; then skip=1; continue; fi\n  set -- \"$@\" \"$a\"\ndone\n"
                        f"exec {real} \"$@\"\n")
        fake.chmod(fake.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        os.chmod(folder, 0o755)
        monkeypatch.setattr(boundary_module.shutil, "which", lambda name: str(fake) if name == "bwrap" else None)
        found = boundary_module._discover.__wrapped__()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    assert isinstance(found, str) and "the system-call filter is not in force" in found, found


def test_the_real_boundary_runs_code_under_the_filter():
    from engine.sandbox import SandboxLimits, run_python

    result = run_python("print([l.split()[1] for l in open('/proc/self/status') if l.startswith('Seccomp:')])",
                        limits=SandboxLimits(timeout_s=5.0))
    assert result.ok and result.stdout.strip() == "['2']", result


def test_a_sandbox_that_shares_the_network_gets_internet_sockets_and_no_others():
    from engine.sandbox import SandboxLimits, run_python

    program = ("import socket\nsocket.socket(socket.AF_INET6, socket.SOCK_DGRAM).close()\n"
               "try:\n    socket.socket(40, socket.SOCK_STREAM)\nexcept OSError as exc:\n    print('vsock', exc.errno)\n")
    result = run_python(program, limits=SandboxLimits(timeout_s=5.0, network=True, audit_hook=False))
    assert result.ok and result.stdout.strip() == "vsock 1", result
