"""No import circles anywhere in the repo: every package imports downwards only.

An import counts wherever it is written: at the top of a module, inside a function (a lazy import),
under ``if TYPE_CHECKING:``, or as ``importlib.import_module("a.literal.name")``. A circle hidden in
any of these still ties the modules together: the type checker, a refactoring and the next reader
all follow it.
"""

from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import grimp

PACKAGES = ("engine", "db", "jobs", "app", "cooplab", "bench")
IMPORT_FUNCTIONS = ("import_module", "__import__")


def string_imports(source: str) -> list[str]:
    """The module names ``source`` imports by a literal string: ``importlib.import_module("a.b")``,
    ``import_module("a.b")`` or ``__import__("a.b")``. A computed name is not a dependency one can read."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not node.args:
            continue
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        first = node.args[0]
        literal = first.value if isinstance(first, ast.Constant) and isinstance(first.value, str) else None
        if name in IMPORT_FUNCTIONS and literal and not literal.startswith("."):
            found.append(literal)
    return found


def _module_files(graph: grimp.ImportGraph, packages: tuple[str, ...]) -> dict[str, Path]:
    """The source file of each module of ``packages`` (found on the path; nothing is imported)."""
    files = {}
    for package in packages:
        spec = importlib.util.find_spec(package)
        if spec is None or spec.origin is None:
            continue
        base = Path(spec.origin).parent
        for module in graph.find_descendants(package) | {package}:
            parts = module.split(".")[1:]
            package_init = base.joinpath(*parts, "__init__.py")
            path = package_init if package_init.is_file() else base.joinpath(*parts).with_suffix(".py")
            if path.is_file():
                files[module] = path
    return files


def _nearest_module(graph: grimp.ImportGraph, name: str) -> str | None:
    """``name`` if the graph has it, else its closest enclosing package in the graph (or None)."""
    parts = name.split(".")
    while parts:
        candidate = ".".join(parts)
        if candidate in graph.modules:
            return candidate
        parts.pop()
    return None


def add_package_imports(graph: grimp.ImportGraph) -> None:
    """Importing ``p.q.r`` first runs ``p/__init__.py`` and ``p/q/__init__.py``: from outside a package,
    an import of one of its modules is an import of the package too (from inside, the package is
    already being set up). Without these edges ``a.x -> b.y`` and ``b/__init__ -> a.x`` look fine."""
    for importer in list(graph.modules):
        for imported in list(graph.find_modules_directly_imported_by(importer)):
            parts = imported.split(".")
            for depth in range(1, len(parts)):
                package = ".".join(parts[:depth])
                inside = importer == package or importer.startswith(package + ".")
                if not inside and package in graph.modules:
                    graph.add_import(importer=importer, imported=package)


def import_graph(*packages: str) -> grimp.ImportGraph:
    """Every import of ``packages``: grimp's (top level, lazy and ``TYPE_CHECKING``), string imports, and
    the package ``__init__`` modules each import runs first (:func:`add_package_imports`)."""
    graph = grimp.build_graph(*packages, exclude_type_checking_imports=False, cache_dir=None)  # fresh: no stale cache
    for module, path in _module_files(graph, packages).items():
        for name in string_imports(path.read_text(encoding="utf-8")):
            imported = _nearest_module(graph, name)
            if imported is not None and imported != module:
                graph.add_import(importer=module, imported=imported)
    add_package_imports(graph)
    return graph


def import_cycles(graph) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iterative)."""
    modules = sorted(graph.modules)
    edges = {m: sorted(n for n in graph.find_modules_directly_imported_by(m) if n in graph.modules) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    cycles: list[list[str]] = []
    for root in modules:
        if root in index:
            continue
        work = [(root, 0)]
        while work:
            node, position = work.pop()
            if position == 0:
                index[node] = low[node] = len(index)
                stack.append(node)
                on_stack.add(node)
            for i in range(position, len(edges[node])):
                child = edges[node][i]
                if child not in index:
                    work += [(node, i + 1), (child, 0)]
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        cycles.append(sorted(group))
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
    return cycles


def test_the_cycle_finder_finds_a_circle():
    graph = grimp.ImportGraph()
    for name in ("a", "b", "c", "d"):
        graph.add_module(name)
    graph.add_import(importer="a", imported="b")
    graph.add_import(importer="b", imported="c")
    graph.add_import(importer="c", imported="a")
    graph.add_import(importer="c", imported="d")
    assert import_cycles(graph) == [["a", "b", "c"]]


def test_string_imports_are_the_literal_names_only():
    source = (
        "import importlib\n"
        "from importlib import import_module\n"
        "def f(name):\n"
        "    importlib.import_module('pkg.one')\n"
        "    import_module('pkg.two', package=None)\n"
        "    __import__('pkg.three')\n"
        "    importlib.import_module(name)\n"  # computed: not a readable dependency
        "    importlib.import_module('.relative', 'pkg')\n"
        "    resources.files('pkg.data')\n"
    )
    assert string_imports(source) == ["pkg.one", "pkg.two", "pkg.three"]


def test_lazy_type_checking_and_string_imports_close_a_circle(tmp_path, monkeypatch):
    """Three circles no top-level import shows: each needs one hidden import to close."""
    package = tmp_path / "hidden"
    package.mkdir()
    files = {
        "__init__.py": "",
        "typed.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from hidden.plain import Thing\n",
        "plain.py": "import hidden.typed\nimport hidden.lazy\nimport hidden.registry\nThing = int\n",
        "lazy.py": "def load():\n    import hidden.plain\n",
        "registry.py": "import importlib\ndef builtins():\n    importlib.import_module('hidden.builtin')\n",
        "builtin.py": "from hidden.registry import builtins\n",
        "alone.py": "import hidden.plain\n",
    }
    for name, text in files.items():
        (package / name).write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    cycles = import_cycles(import_graph("hidden"))
    assert sorted(cycles) == [["hidden.builtin", "hidden.registry"], ["hidden.lazy", "hidden.plain", "hidden.typed"]]


def test_no_import_circles_in_the_repo():
    assert import_cycles(import_graph(*PACKAGES)) == []


def test_a_package_s_init_closes_a_circle(tmp_path, monkeypatch):
    """``a.x`` imports ``b.y``, which runs ``b/__init__.py`` first, which imports ``a.x``: a circle that
    fails at import time though no module imports another that imports it back."""
    for name, text in {"a/__init__.py": "", "a/x.py": "from b.y import thing\n",
                       "b/__init__.py": "from a.x import thing\n", "b/y.py": "thing = 1\n"}.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text, encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert import_cycles(import_graph("a", "b")) == [["a.x", "b"]]
