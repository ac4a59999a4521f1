"""A submit's writes to PostgreSQL with ``psycopg2`` alone: no SQLAlchemy.

``cooplab submit`` and :func:`cooplab.api.submit` on PostgreSQL make the three writes of
:class:`db.run_writes.RunWrites` (get or create the experiment, create the run, record its task id);
importing SQLAlchemy and its PostgreSQL dialect for them costs about 0.2 CPU-seconds of a submit's
start-up. :class:`PostgresRunWrites` makes them on one ``psycopg2`` connection as an engine of
:func:`db.engine.make_engine` does: connected with the URL's arguments as SQLAlchemy's psycopg2
dialect passes them (:func:`postgres_connect_args`; libpq's ``connect_timeout`` is
:data:`db.write_bounds.CONNECT_TIMEOUT_S` unless the URL sets one), each write transaction bounded by
the same ``set_config`` statement (:data:`db.write_bounds.BOUND_WRITE`), a new run stamped with the
server's clock as :class:`db.clock.db_now` renders it on PostgreSQL (a test holds the two equal). Values
are stored as SQLAlchemy binds them (times as naive UTC, JSON as ``json.dumps`` text) and read back as
it returns them (times as aware UTC; ``psycopg2`` decodes JSON columns itself), so the rows, the errors
and the records are the Core writes' own (``tests/db/test_db_run_writes.py`` runs both through the same
checks). The writes and the schema check are shared with the SQLite file's writer
(:mod:`db.dbapi_writes`).

Other PostgreSQL URLs (another driver, psycopg 3 installed for a bare ``postgresql://``, several hosts)
keep :class:`db.run_writes.RunWrites`.
"""

from __future__ import annotations

import importlib.util
import json
import re
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, unquote

from db.dbapi_writes import DbapiRunWrites
from db.write_bounds import BOUND_WRITE, CONNECT_TIMEOUT_S

NOW = "SELECT (statement_timestamp() AT TIME ZONE 'UTC')"
"""The server's time as :class:`db.clock.db_now` reads it on PostgreSQL (naive UTC)."""

# the rest of a URL after its scheme, as sqlalchemy.engine.url._parse_url splits it
_URL = re.compile(r"""
    (?:(?P<username>[^:/]*)(?::(?P<password>[^@]*))?@)?
    (?:(?:\[(?P<ipv6host>[^/?]+)\]|(?P<ipv4host>[^/:?]+))?(?::(?P<port>[^/?]*))?)?
    (?:/(?P<database>[^?]*))?
    (?:\?(?P<query>.*))?
""", re.X)


def postgres_connect_args(url: str) -> dict[str, Any] | None:
    """``psycopg2.connect``'s keyword arguments for ``url`` as an engine of :func:`db.engine.make_engine`
    passes them (SQLAlchemy's psycopg2 dialect: user, password, host, port, dbname, then every query
    parameter; ``connect_timeout`` unless the URL sets one). None where that engine would not use
    ``psycopg2`` with a plain set of arguments: another database or driver, a bare ``postgresql://``
    with psycopg 3 installed (the engine takes psycopg 3), several hosts, a query parameter given twice,
    a URL that does not parse."""
    for scheme in ("postgresql+psycopg2://", "postgresql://"):
        if url.startswith(scheme):
            break
    else:
        return None
    if scheme == "postgresql://" and (importlib.util.find_spec("psycopg") is not None
                                      or importlib.util.find_spec("psycopg2") is None):
        return None
    found = _URL.fullmatch(url[len(scheme):])
    if found is None:
        return None
    parts = found.groupdict()
    args: dict[str, Any] = {}
    for name, key in (("username", "user"), ("password", "password"), ("database", "dbname")):
        if parts[name]:
            args[key] = unquote(parts[name])
    host = parts["ipv4host"] or parts["ipv6host"]
    if host:
        args["host"] = host
    if parts["port"]:
        if not parts["port"].isdigit():
            return None
        args["port"] = int(parts["port"])
    query = parse_qsl(parts["query"] or "")
    keys = [key for key, _ in query]
    if len(set(keys)) != len(keys) or {"host", "port", "hostaddr"} & set(keys):
        return None  # several values, several hosts: SQLAlchemy's own handling
    args.update(query)
    args.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
    return args


class PostgresRunWrites(DbapiRunWrites):
    """:class:`db.run_writes.RunWrites`'s three writes on the PostgreSQL database of ``url``, each one
    bounded write transaction on one ``psycopg2`` connection (:class:`db.dbapi_writes.DbapiRunWrites`);
    ``connect_args`` are :func:`postgres_connect_args` of ``url``."""

    marker = "%s"
    now_sql = NOW

    def __init__(self, url: str, connect_args: dict[str, Any]) -> None:
        import psycopg2

        super().__init__(url)
        self.driver = psycopg2
        self._connect_args = connect_args

    def _connect(self) -> Any:
        conn = self.driver.connect(**self._connect_args)
        conn.autocommit = True  # transactions begun and ended by statements, as the engine's
        return conn

    def _begin(self, conn: Any) -> None:
        self._execute(conn, "BEGIN")
        self._execute(conn, BOUND_WRITE)  # local to this transaction (db.engine)

    def _dropped(self, conn: Any) -> bool:
        return bool(conn.closed)  # psycopg2 marks a connection the server closed once it is used

    def _to_db(self, value: Any) -> Any:
        if isinstance(value, datetime):  # as db.tables.UTCDateTime binds it
            return (value.astimezone(UTC) if value.tzinfo is not None else value).replace(tzinfo=None)
        if isinstance(value, (dict, list)):
            return json.dumps(value)
        return value

    def _from_db(self, table: str, name: str, value: Any) -> Any:
        if isinstance(value, datetime):  # as db.tables.UTCDateTime returns it
            return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value


__all__ = ["NOW", "PostgresRunWrites", "postgres_connect_args"]
