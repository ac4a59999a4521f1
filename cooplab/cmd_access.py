"""Who may use the dashboard, from the command line: ``cooplab hash-password`` makes the credential,
and :func:`announce_signin` is the launcher's check for ``cooplab ui`` / ``cooplab up`` (rules in
``app/access.py`` and ``app/hosts.py``)."""

from __future__ import annotations

import sys

import typer


def _fail(message: str, code: int = 2) -> None:
    typer.secho(message, fg=typer.colors.RED, err=True)
    raise typer.Exit(code)


def announce_hosts(host: str) -> None:
    """Say which host names the dashboard on ``host`` answers to; refuse an unreadable
    ``COOPLAB_UI_ALLOWED_HOSTS``."""
    import socket

    from app.hosts import allowed_names, parse_allowed_hosts
    from jobs.settings import get_settings

    try:
        extra = parse_allowed_hosts(get_settings().ui_allowed_hosts)
    except ValueError as exc:
        _fail(f"refusing to start the dashboard: {exc}")
    names = ", ".join(sorted(allowed_names(host, extra, (socket.gethostname(),))))
    typer.echo(f"Host names it answers to: {names} and IP addresses (add more with COOPLAB_UI_ALLOWED_HOSTS)")


def announce_signin(host: str) -> None:
    """Say whether the dashboard on ``host`` will ask for sign-in and which host names it answers to;
    refuse to go on when it must ask but no usable password hash is configured."""
    from app.access import HASH_COMMAND, SETTING, hash_problem, signin_required
    from jobs.settings import get_settings

    announce_hosts(host)
    if not signin_required(host):
        typer.echo(f"Sign-in: not required (the dashboard listens on {host}, reachable from this machine only)")
        return
    problem = hash_problem(get_settings().ui_password_hash)
    if problem:
        _fail(f"refusing to start the dashboard on {host}: other machines can reach it, so it requires "
              f"sign-in, but {problem}.\nRun `{HASH_COMMAND}` and set {SETTING} to the hash it prints "
              "(or listen on 127.0.0.1).")
    typer.echo(f"Sign-in: required (the dashboard listens on {host}); the password is checked against {SETTING}")


def hash_password() -> None:
    """Print a salted hash of a password for COOPLAB_UI_PASSWORD_HASH (prompted on a terminal, else
    the first line of stdin)."""
    from app.access import SETTING
    from app.access import hash_password as make_hash

    if sys.stdin.isatty():
        # prompts go to stderr, so `export COOPLAB_UI_PASSWORD_HASH="$(cooplab hash-password)"` works
        password = typer.prompt("Dashboard password", hide_input=True, confirmation_prompt=True, err=True)
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    try:
        hashed = make_hash(password)
    except ValueError as exc:
        _fail(str(exc))
    typer.echo(hashed)
    typer.echo(f"Set {SETTING} to the hash printed on stdout (it holds no password).", err=True)


def register(app: typer.Typer) -> None:
    """Add ``hash-password`` to the ``cooplab`` CLI."""
    app.command("hash-password")(hash_password)
