"""pytest plugin of the conformance run (:mod:`tests.conformance.runner` copies it next to CoMLRL's
rewritten tests as ``cooplab_conformance_plugin.py``; it is not a test module of CoopLab's suite).

It refuses any import of CoMLRL itself (a test passing through an installed ``comlrl`` would measure
CoMLRL, not CoopLab), does not import the files whose every test is out of scope, deselects the other
out-of-scope tests, and writes every test's outcome (with the last line of its failure), the deselected
tests and the files left out to the results file.
"""

from __future__ import annotations

import fnmatch
import importlib.abc
import json
import os
import sys
from pathlib import Path

SCOPE_ENV = "COOPLAB_CONFORMANCE_SCOPE"  # JSON: {"out_of_scope": [patterns], "run_all": bool}
RESULTS_ENV = "COOPLAB_CONFORMANCE_RESULTS"  # where the outcomes go (JSON)

_results: dict[str, dict[str, str]] = {}
_deselected: list[str] = []
_ignored: list[str] = []


class _NoCoMLRL(importlib.abc.MetaPathFinder):
    """Refuses ``comlrl`` and its submodules: the rewritten tests import ``engine.comlrl`` only."""

    def find_spec(self, name, path=None, target=None):  # noqa: ANN001, ANN201 (importlib's protocol)
        if name == "comlrl" or name.startswith("comlrl."):
            raise ImportError(f"conformance: {name} is CoMLRL itself; the rewritten tests must import "
                              f"engine.comlrl (an import line the rewrite missed?)")
        return None


def short_id(nodeid: str) -> str:
    """``tests/test_x.py::test_y[p]`` -> ``test_x.py::test_y[p]`` (the scope file's form)."""
    path, sep, rest = nodeid.partition("::")
    return f"{Path(path).name}{sep}{rest}"


def matches(test_id: str, pattern: str) -> bool:
    """Whether ``pattern`` (``*`` and ``?`` wildcards; brackets literal, as in parameter ids) matches a
    test id, or its name without the ``[parameters]`` (a pattern naming a test covers every
    parametrization)."""
    glob = "".join({"[": "[[]", "]": "[]]"}.get(c, c) for c in pattern)
    return fnmatch.fnmatchcase(test_id, glob) or fnmatch.fnmatchcase(test_id.split("[")[0], glob)


def _scope() -> dict:
    return json.loads(os.environ.get(SCOPE_ENV, "{}"))


def pytest_configure(config):  # noqa: ANN001, ANN201
    sys.meta_path.insert(0, _NoCoMLRL())


def pytest_ignore_collect(collection_path, config):  # noqa: ANN001, ANN201
    scope = _scope()
    name = collection_path.name
    if not scope.get("run_all") and f"{name}::*" in scope.get("out_of_scope", []):
        _ignored.append(name)
        return True
    return None


def pytest_collection_modifyitems(config, items):  # noqa: ANN001, ANN201
    scope = _scope()
    if scope.get("run_all"):
        return
    patterns = scope.get("out_of_scope", [])
    keep, drop = [], []
    for item in items:
        (drop if any(matches(short_id(item.nodeid), p) for p in patterns) else keep).append(item)
    if drop:
        _deselected.extend(short_id(item.nodeid) for item in drop)
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _last_line(report) -> str:  # noqa: ANN001
    text = getattr(report, "longreprtext", "") or ""
    lines = [line for line in text.splitlines() if line.startswith("E ")]
    line = lines[-1] if lines else (text.strip().splitlines() or [""])[-1]
    return line.removeprefix("E").strip()[:300]


def pytest_collectreport(report):  # noqa: ANN001, ANN201
    if report.failed:
        _results[short_id(report.nodeid)] = {"outcome": "error", "message": _last_line(report)}


def pytest_runtest_logreport(report):  # noqa: ANN001, ANN201
    key = short_id(report.nodeid)
    if report.when == "call" or (report.when == "setup" and not report.passed):
        outcome = report.outcome if report.when == "call" else ("skipped" if report.skipped else "error")
        _results[key] = {"outcome": outcome, "message": _last_line(report) if not report.passed else ""}
    elif report.when == "teardown" and report.failed and _results.get(key, {}).get("outcome") == "passed":
        _results[key] = {"outcome": "error", "message": _last_line(report)}


def pytest_sessionfinish(session, exitstatus):  # noqa: ANN001, ANN201
    target = os.environ.get(RESULTS_ENV)
    if target:
        Path(target).write_text(json.dumps({"results": _results, "deselected": _deselected,
                                            "ignored_files": sorted(set(_ignored))}, indent=1, sort_keys=True))
