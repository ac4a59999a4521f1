"""Reading model-written code: pull it out of a completion and find the structure the reward needs.

Everything here is static analysis with :mod:`ast`; nothing is executed.
"""

from __future__ import annotations

import ast
import re
import warnings
from dataclasses import dataclass

_FENCE = re.compile(r"```(?:python|py|Python)?[ \t]*\n(.*?)(?:```|$)", re.DOTALL)


def extract_code(completion: str) -> str:
    """The code of a completion: the first fenced block if there is one, else the text itself."""
    match = _FENCE.search(completion)
    code = match.group(1) if match else completion
    return code.rstrip() + "\n" if code.strip() else ""


def assemble_program(prompt: str, helper_code: str, main_code: str, entry_point: str) -> str:
    """The joint program: the problem's prompt (imports, helpers, stub), the helper, then the main
    function. A main part without ``def <entry_point>`` is a body that continues the prompt's stub."""
    if not _defines(main_code, entry_point) and main_code.strip():
        main_code = prompt.rstrip("\n") + "\n" + main_code
    parts = [prompt.rstrip("\n"), helper_code.rstrip("\n"), main_code.rstrip("\n")]
    return "\n\n".join(p for p in parts if p.strip()) + "\n"


def _defines(code: str, name: str) -> bool:
    return re.search(rf"^\s*(async\s+)?def\s+{re.escape(name)}\s*\(", code, re.MULTILINE) is not None


@dataclass(frozen=True)
class CodeFacts:
    """What the reward's structure and cooperation levels look at. ``main_problem`` and
    ``helper_problem`` say why a function cannot be tested (empty when it can), for the feedback."""

    helper_defined: bool
    helper_returns: bool
    main_defined: bool
    main_returns: bool
    syntax_ok: bool
    syntax_error: str
    calls_helper: bool
    trivial_wrapper: bool
    helper_result_ignored: bool
    main_problem: str = ""
    helper_problem: str = ""
    wrapper: bool = False  # CoMLRL's wrapper: `return aux(...)`, or `x = aux(...)` then `return x`


@dataclass(frozen=True)
class PartFacts:
    """Whether each part, read on its own, defines its function returning a value (CoMLRL's level 1)."""

    helper_ok: bool
    main_ok: bool


def part_facts(helper_code: str, main_code: str, prompt: str, entry_point: str, helper_name: str = "aux") -> PartFacts:
    """Each part parsed alone: the helper part must define ``helper_name`` and the main part the entry
    point (a bare body continues the prompt's stub), each callable by the tests and returning a value."""

    def ok(code: str, name: str) -> bool:
        tree = _parse(code)[0] if code.strip() else None
        if tree is None:
            return False
        fn, problem = top_level_def(tree, name)
        return fn is not None and not problem

    main_source = main_code if _defines(main_code, entry_point) or not main_code.strip() else (
        assemble_program(prompt, "", main_code, entry_point))
    return PartFacts(helper_ok=ok(helper_code, helper_name), main_ok=ok(main_source, entry_point))


def _wraps(body: list[ast.stmt], name: str) -> bool:
    """``return name(...)``, or ``x = name(...)`` followed by ``return x``."""
    if len(body) == 1:
        return isinstance(body[0], ast.Return) and body[0].value is not None and _is_call_to(body[0].value, name)
    if len(body) == 2:
        first, second = body
        return (isinstance(first, ast.Assign) and len(first.targets) == 1 and isinstance(first.targets[0], ast.Name)
                and _is_call_to(first.value, name) and isinstance(second, ast.Return)
                and isinstance(second.value, ast.Name) and second.value.id == first.targets[0].id)
    return False


_SCOPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _own_nodes(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.AST]:
    """Every node of ``fn``'s own body: nested functions, classes and lambdas are not entered."""
    found: list[ast.AST] = []
    stack: list[ast.AST] = list(fn.body)
    while stack:
        node = stack.pop()
        found.append(node)
        if not isinstance(node, _SCOPES):
            stack.extend(ast.iter_child_nodes(node))
    return found


def _binds(statement: ast.stmt, name: str) -> bool:
    """Whether a module-level ``statement`` binds or deletes ``name`` in the module's namespace (an
    assignment, a def or class, an import, ``del``, a loop or ``with`` target, ``except ... as``, a
    walrus, a match capture), in any block; not inside functions, classes or comprehensions."""
    stack: list[ast.AST] = [statement]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            if node.name == name:
                return True
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, ast.Lambda | ast.ListComp | ast.SetComp | ast.DictComp | ast.GeneratorExp):
            if any(isinstance(n, ast.NamedExpr) and n.target.id == name for n in ast.walk(node)):
                return True  # a walrus in a comprehension binds in the enclosing scope
            continue
        if isinstance(node, ast.Name) and node.id == name and isinstance(node.ctx, ast.Store | ast.Del):
            return True
        if isinstance(node, ast.alias) and (node.asname or node.name.split(".")[0]) == name:
            return True
        if isinstance(node, ast.ExceptHandler | ast.MatchAs | ast.MatchStar) and node.name == name:
            return True
        if isinstance(node, ast.MatchMapping) and node.rest == name:
            return True
        stack.extend(ast.iter_child_nodes(node))
    return False


def top_level_def(tree: ast.Module, name: str) -> tuple[ast.FunctionDef | None, str]:
    """The function the tests would call as ``name`` after running the program, and why there is
    none ("" when there is): it must be a plain ``def`` at the top level of the module (not under
    ``if``, ``try`` or a loop, not a method, not nested), with a body, bound to nothing else after
    it, neither async nor a generator, and its own body (not a nested function's) must return a value."""
    defs = [(node, tree.body[i + 1:]) for i, node in enumerate(tree.body)
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name]
    fn, after = defs[-1] if defs else (None, [])
    if fn is None or not _body_without_docstring(fn):
        nested = any(isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and n.name == name and n not in tree.body
                     for n in ast.walk(tree))
        if nested:
            return None, ("is defined only inside a class, a function or a block (if, try, a loop...): the tests "
                          "call a function defined at the top level of the program")
        return None, "has no body" if fn is not None else "is not defined"
    if any(_binds(statement, name) for statement in after):
        return None, f"is bound again after its definition (an assignment, del, class or import of `{name}`)"
    if isinstance(fn, ast.AsyncFunctionDef):
        return None, "is async: calling it gives a coroutine, not a value"
    own = _own_nodes(fn)
    if any(isinstance(n, ast.Yield | ast.YieldFrom) for n in own):
        return None, "is a generator (it yields): calling it gives a generator, not a value"
    if not any(isinstance(n, ast.Return) and n.value is not None for n in own):
        if any(isinstance(n, ast.Return) and n.value is not None for n in ast.walk(fn)):
            return fn, "returns a value only from a nested function or class, never from its own body"
        return fn, "never returns a value"
    return fn, ""


def _body_without_docstring(fn: ast.FunctionDef | ast.AsyncFunctionDef) -> list[ast.stmt]:
    body = list(fn.body)
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) and isinstance(
        body[0].value.value, str
    ):
        body = body[1:]
    return body


def _is_call_to(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def syntax_error_text(exc: SyntaxError) -> str:
    """One line naming a parse error and, when the parser knows it, where: ``SyntaxError: invalid
    syntax (line 8, column 12)``; the line alone when the column is unknown; no position at all when
    neither is known (a null byte in the source, for example)."""
    where = ""
    if exc.lineno is not None:
        where = f" (line {exc.lineno}" + (f", column {exc.offset})" if exc.offset is not None else ")")
    return f"{type(exc).__name__}: {exc.msg}{where}"


def parse_quietly(source: str) -> ast.Module:
    """``ast.parse`` of model-written code without printing its compile warnings (``"is" with a
    literal``, invalid escape sequences...) to the worker's console: they describe the model's code,
    not a problem of the run. Raises ``SyntaxError`` as ``ast.parse`` does."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", SyntaxWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        return ast.parse(source)


def _parse(source: str) -> tuple[ast.Module | None, str]:
    """The syntax tree of ``source``, or ``None`` and why it does not parse. Input nested deeper
    than the parser can follow (it runs out of recursion or memory) counts as not parsing."""
    try:
        return parse_quietly(source), ""
    except SyntaxError as exc:
        return None, syntax_error_text(exc)
    except (RecursionError, MemoryError):
        return None, "the program is nested too deeply to parse"
    except ValueError as exc:  # older interpreters reject a null byte this way
        return None, f"the program cannot be parsed ({exc})"


def analyze(
    helper_code: str, main_code: str, program: str, entry_point: str, helper_name: str = "aux"
) -> CodeFacts:
    """Structure facts of the helper part, the main part and the joint program they assemble into.

    Read from syntax trees only: when the joint program does not parse, nothing is defined (no
    function, no return), so code that does not parse earns no structure credit."""
    tree, syntax_error = _parse(program)
    syntax_ok = tree is not None
    # structure is read from parsed code only: a program that does not parse defines nothing
    helper_tree = _parse(helper_code)[0] if syntax_ok and helper_code.strip() else None
    helper_fn, helper_problem = top_level_def(helper_tree, helper_name) if helper_tree is not None else (None, "")
    main_fn, main_problem = top_level_def(tree, entry_point) if tree is not None else (None, "")
    main_defined = main_fn is not None
    main_returns = main_defined and not main_problem
    calls = main_fn is not None and any(_is_call_to(n, helper_name) for n in ast.walk(main_fn))
    body = _body_without_docstring(main_fn) if main_fn is not None else []
    trivial = (
        len(body) == 1 and isinstance(body[0], ast.Return) and body[0].value is not None
        and _is_call_to(body[0].value, helper_name)
    )
    ignored = main_fn is not None and any(
        isinstance(n, ast.Expr) and _is_call_to(n.value, helper_name) for n in ast.walk(main_fn)
    )
    return CodeFacts(
        helper_defined=helper_fn is not None,
        helper_returns=helper_fn is not None and not helper_problem,
        main_defined=main_defined,
        main_returns=main_returns,
        syntax_ok=syntax_ok,
        syntax_error=syntax_error,
        calls_helper=calls,
        trivial_wrapper=trivial,
        helper_result_ignored=ignored,
        main_problem=main_problem if syntax_ok else "",
        helper_problem=helper_problem if helper_tree is not None else ("is not defined" if syntax_ok else ""),
        wrapper=_wraps(body, helper_name),
    )
