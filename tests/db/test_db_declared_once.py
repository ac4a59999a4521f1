"""Each store operation is declared once: the store's method holds the body and opens its own session
(``with self._write() as session:``), never a facade method that only hands its session to a function
with a second copy of the signature (the layout before, where 66 methods did only that)."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import textwrap
from collections.abc import Callable, Iterator
from typing import Any

import db
from db.engine import write_session
from db.eval_request_store import EvalRequestStore
from db.evaluation_store import EvaluationStore
from db.store import Store
from db.study_store import StudyStore

STORE_CLASSES = (Store, StudyStore, EvaluationStore, EvalRequestStore)
SESSION_HELPERS = {
    "server_now": "db.clock.server_now(session) is the clock that other operations read inside their own "
                  "transactions; Store.server_now is its one public reading",
}


def _public_methods() -> Iterator[tuple[str, str, Callable[..., Any]]]:
    for cls in STORE_CLASSES:
        for klass in cls.__mro__:
            if not klass.__module__.startswith("db."):
                continue
            for name, member in vars(klass).items():
                if not name.startswith("_") and inspect.isfunction(member):
                    yield klass.__qualname__, name, member


def hands_its_session_on(method: Callable[..., Any]) -> str | None:
    """The function a method only hands its session to (``with ... as s: return f(s, ...)`` and
    nothing else), or None when the method holds a body of its own."""
    function = ast.parse(textwrap.dedent(inspect.getsource(method))).body[0]
    assert isinstance(function, ast.FunctionDef)
    body = function.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring
    if len(body) != 1 or not isinstance(body[0], ast.With) or len(body[0].body) != 1:
        return None
    target = body[0].items[0].optional_vars
    statement = body[0].body[0]
    call = statement.value if isinstance(statement, ast.Return | ast.Expr) else None
    if not isinstance(target, ast.Name) or not isinstance(call, ast.Call) or not call.args:
        return None
    first = call.args[0]
    return ast.unparse(call.func) if isinstance(first, ast.Name) and first.id == target.id else None


def test_the_check_finds_a_facade_method() -> None:
    class Facade:
        engine: Any = None

        def get_run(self, run_id: int) -> Any:
            """A method of the old layout."""
            with write_session(self.engine) as s:
                return db.store.get_run(s, run_id)  # type: ignore[attr-defined]

        def own_body(self, run_id: int) -> Any:
            with write_session(self.engine) as s:
                return s.get(object, run_id)

    assert hands_its_session_on(Facade.get_run) == "db.store.get_run"
    assert hands_its_session_on(Facade.own_body) is None


def test_no_store_method_only_hands_its_session_to_another_function() -> None:
    methods = list(_public_methods())
    assert len({name for _, name, _ in methods}) > 70  # every store class was read
    facades = [f"{owner}.{name} only calls {callee}(session, ...)" for owner, name, method in methods
               if name not in SESSION_HELPERS and (callee := hands_its_session_on(method)) is not None]
    assert facades == [], "put the operation's body in the method (one declaration per operation)"


def test_no_function_taking_a_session_repeats_a_store_method() -> None:
    names = {name for _, name, _ in _public_methods()} - set(SESSION_HELPERS)
    twins = []
    for info in pkgutil.iter_modules(db.__path__):
        module = importlib.import_module(f"db.{info.name}")
        for name, function in inspect.getmembers(module, inspect.isfunction):
            parameters = list(inspect.signature(function).parameters.values())
            takes_session = bool(parameters) and "Session" in str(parameters[0].annotation)
            if function.__module__ == module.__name__ and takes_session and name in names:
                twins.append(f"{module.__name__}.{name}")
    assert twins == [], "a store operation is declared twice: fold the function into the store's method"
