"""No import circles anywhere in the repo: every package imports downwards only."""

from __future__ import annotations

import grimp

PACKAGES = ("transcripts", "engine", "db", "jobs", "app", "cooplab", "bench")


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


def test_no_import_circles_in_the_repo():
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=True)
    assert import_cycles(graph) == []
