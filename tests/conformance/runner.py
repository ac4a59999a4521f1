"""CoMLRL 1.4.3's own test suite, run against CoopLab's compatibility layer (``engine.comlrl``).

    python -m tests.conformance.runner            # what `make conformance` runs
    python -m tests.conformance.runner --all      # the out-of-scope tests too, for information
    python -m tests.conformance.runner --sdist comlrl-1.4.3.tar.gz --keep /tmp/conf --list

Downloads CoMLRL 1.4.3's source distribution with pip (never stored in this repository), checks its
SHA-256, unpacks its ``tests/`` folder into a scratch directory, rewrites only the ``comlrl`` import
lines to ``engine.comlrl`` and runs the tests with pytest (CoMLRL itself cannot be imported during the
run: :mod:`tests.conformance.plugin`). Every test is then classified with :mod:`tests.conformance.scope`:
public (must pass), a documented deviation (must fail, for the reason given), pending (not compatible
yet) or out of scope (CoMLRL internals: not run). Prints passed / failed per test file and exits
0 when every outcome is the expected one, 1 when one is not (a public test failing, or a deviation or
pending test passing: take it off its list), 2 when the run could not happen (no registry, a changed
download, pytest crashed), with the reason.

Not collected by CoopLab's own suite (no ``test_`` prefix); its pure parts are tested in
``tests/conformance/test_conformance_runner.py``.
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

if __package__ in (None, ""):  # run as a file: python tests/conformance/runner.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.conformance import scope as scope_lists  # noqa: E402
from tests.conformance.plugin import matches  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
PACKAGE = "comlrl==1.4.3"
SDIST_NAME = "comlrl-1.4.3.tar.gz"
SDIST_SHA256 = "28ecab40cc5182e522d50f4d6be44486a1afe8d7a3108cab73400c24c6188fde"
PREFIX = "engine.comlrl"
PLUGIN = "cooplab_conformance_plugin"
PYTEST_INI = """[pytest]
testpaths = tests
timeout = 300
filterwarnings =
    ignore::DeprecationWarning
    ignore::FutureWarning
"""


class ConformanceError(RuntimeError):
    """The conformance run could not happen (download, checksum, unpacking, pytest itself)."""


# -- fetching and preparing CoMLRL's tests --------------------------------------------------------
def fetch_sdist(dest: Path, pip: Sequence[str] | None = None) -> Path:
    """Download CoMLRL 1.4.3's sdist into ``dest`` with pip; raise :class:`ConformanceError` with pip's
    reason when it cannot (no network, no registry)."""
    pip = list(pip) if pip is not None else [sys.executable, "-m", "pip"]
    cmd = [*pip, "download", "--no-deps", "--no-binary", ":all:", PACKAGE, "-d", str(dest)]
    proc = subprocess.run(cmd, capture_output=True, text=True)
    path = dest / SDIST_NAME
    if proc.returncode != 0 or not path.is_file():
        lines = (proc.stderr + proc.stdout).strip().splitlines() or [f"exit status {proc.returncode}"]
        errors = [line.strip() for line in lines if line.startswith("ERROR") or "onnection" in line]
        reason = " / ".join(errors[-3:] or lines[-1:])[:600]
        raise ConformanceError(f"could not download {PACKAGE}'s source distribution from the package index "
                               f"({reason}); the conformance run needs the registry (or --sdist PATH to a "
                               f"downloaded {SDIST_NAME})")
    return path


def verify_sha256(path: Path, expected: str = SDIST_SHA256) -> None:
    """Raise :class:`ConformanceError` unless ``path`` has the pinned SHA-256 (the tests the counts and
    lists were measured on)."""
    digest = hashlib.sha256(path.read_bytes()).hexdigest()
    if digest != expected:
        raise ConformanceError(f"{path.name} has SHA-256 {digest}, expected {expected}: not the {PACKAGE} "
                               f"source distribution this conformance list was written for")


def extract_tests(sdist: Path, dest: Path) -> Path:
    """Unpack only the sdist's ``tests/`` folder into ``dest/tests``; returns that folder."""
    target = dest / "tests"
    with tarfile.open(sdist) as tar:
        members = []
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if len(parts) > 2 and parts[1] == "tests" and (member.isfile() or member.isdir()):
                member.name = str(Path(*parts[1:]))
                members.append(member)
        if not any(m.name.endswith(".py") for m in members):
            raise ConformanceError(f"{sdist.name} has no tests/ folder")
        tar.extractall(dest, members=members, filter="data")
    return target


_FROM = re.compile(r"^(\s*from\s+)comlrl(?=[\s.])", re.MULTILINE)
_IMPORT = re.compile(r"^(\s*import\s+)comlrl((?:\.\w+)*)(\s+as\s+\w+)?[ \t]*$", re.MULTILINE)


def rewrite_imports(source: str, prefix: str = PREFIX) -> tuple[str, int]:
    """``source`` with every ``comlrl`` import pointed at ``prefix`` and the number of lines changed.

    ``from comlrl.x import y`` -> ``from engine.comlrl.x import y``; ``import comlrl.x as m`` ->
    ``import engine.comlrl.x as m``; ``import comlrl`` -> ``import engine.comlrl as comlrl``. Nothing
    else in the file changes. Raises :class:`ConformanceError` if an import of ``comlrl`` is left (a
    form this rewrite does not know)."""

    def plain_import(match: re.Match[str]) -> str:
        head, dotted, alias = match.group(1), match.group(2), match.group(3)
        if alias:
            return f"{head}{prefix}{dotted}{alias}"
        if dotted:  # `import comlrl.x` binds `comlrl`: bind it to the prefix's module
            return f"{head}{prefix}{dotted}; import {prefix} as comlrl"
        return f"{head}{prefix} as comlrl"

    rewritten, count_from = _FROM.subn(rf"\g<1>{prefix}", source)
    rewritten, count_import = _IMPORT.subn(plain_import, rewritten)
    left = [node.lineno for node in ast.walk(ast.parse(rewritten)) if _imports_comlrl(node)]
    if left:
        raise ConformanceError(f"import of comlrl on line(s) {left} not rewritten (an unknown import form)")
    return rewritten, count_from + count_import


def _imports_comlrl(node: ast.AST) -> bool:
    if isinstance(node, ast.ImportFrom):
        return node.level == 0 and (node.module or "").split(".")[0] == "comlrl"
    if isinstance(node, ast.Import):
        return any(alias.name.split(".")[0] == "comlrl" for alias in node.names)
    return False


def prepare(sdist: Path, workdir: Path) -> int:
    """CoMLRL's tests in ``workdir/tests`` with their imports rewritten, a pytest.ini and the plugin;
    returns the number of import lines rewritten."""
    tests = extract_tests(sdist, workdir)
    changed = 0
    for path in sorted(tests.rglob("*.py")):
        text, count = rewrite_imports(path.read_text())
        path.write_text(text)
        changed += count
    (workdir / "pytest.ini").write_text(PYTEST_INI)
    shutil.copyfile(Path(__file__).with_name("plugin.py"), workdir / f"{PLUGIN}.py")
    return changed


@dataclass
class RunResults:
    """What the plugin recorded: each test's outcome, the deselected tests, the files not imported."""

    results: dict[str, dict[str, str]]
    deselected: list[str] = field(default_factory=list)
    ignored_files: list[str] = field(default_factory=list)


def run_pytest(workdir: Path, *, out_of_scope: Sequence[str], run_all: bool,
               extra_args: Sequence[str] = ()) -> RunResults:
    """Run the prepared tests (pytest's output goes to ``workdir/pytest.log``)."""
    results = workdir / "results.json"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(workdir), str(REPO)]),
           "COOPLAB_CONFORMANCE_SCOPE": json.dumps({"out_of_scope": list(out_of_scope), "run_all": run_all}),
           "COOPLAB_CONFORMANCE_RESULTS": str(results)}
    cmd = [sys.executable, "-m", "pytest", "-q", "--tb=short", "--continue-on-collection-errors", "-p", PLUGIN,
           "-p", "no:randomly", "-p", "no:cacheprovider", "-p", "no:xdist", *extra_args]
    log = workdir / "pytest.log"
    with log.open("w") as out:
        proc = subprocess.run(cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT)
    if not results.is_file() or proc.returncode not in (0, 1, 5):
        tail = "\n".join(log.read_text().splitlines()[-30:])
        raise ConformanceError(f"pytest did not finish (exit status {proc.returncode}):\n{tail}")
    return RunResults(**json.loads(results.read_text()))


# -- classifying the outcomes ----------------------------------------------------------------------
@dataclass(frozen=True)
class Scope:
    """The lists of :mod:`tests.conformance.scope`: pattern -> reason."""

    out_of_scope: Mapping[str, str]
    deviations: Mapping[str, str]
    pending: Mapping[str, str]

    @classmethod
    def from_module(cls) -> Scope:
        """The lists of :mod:`tests.conformance.scope`."""
        return cls(scope_lists.OUT_OF_SCOPE, scope_lists.DEVIATIONS, scope_lists.PENDING)

    def kind(self, test_id: str) -> tuple[str, str]:
        """``(kind, reason)`` of a test: ``out``, ``deviation``, ``pending`` or ``public`` (no reason)."""
        for kind, patterns in (("out", self.out_of_scope), ("deviation", self.deviations),
                               ("pending", self.pending)):
            for pattern, reason in patterns.items():
                if matches(test_id, pattern):
                    return kind, reason
        return "public", ""


# status of (kind, outcome): what a file's row counts it as, and whether it was expected
_STATUS = {
    ("public", "passed"): ("passed", True),
    ("deviation", "failed"): ("deviation", True),
    ("pending", "failed"): ("pending", True),
    ("deviation", "passed"): ("deviation passes: take it off DEVIATIONS", False),
    ("pending", "passed"): ("pending passes: take it off PENDING", False),
}


@dataclass
class Outcome:
    test_id: str
    kind: str
    outcome: str
    status: str
    expected: bool
    reason: str = ""
    message: str = ""


@dataclass
class FileRow:
    name: str
    counts: dict[str, int] = field(default_factory=dict)


COLUMNS = ("public", "passed", "failed", "deviation", "pending", "skipped", "out of scope", "import error")


def classify(results: Mapping[str, Mapping[str, str]], scope: Scope) -> list[Outcome]:
    """Each test's outcome judged against the scope lists (sorted by test id)."""
    outcomes = []
    for test_id, result in sorted(results.items()):
        kind, reason = scope.kind(test_id)
        outcome = result["outcome"]
        if "::" not in test_id and scope.kind(f"{test_id}::*")[0] == "out":  # --all: an out-of-scope file
            kind, status, expected = "out", "out of scope (file does not import)", True
        elif "::" not in test_id:  # the file itself did not import: none of its tests ran
            kind, status, expected = "file", "file does not import", False
        elif kind == "out":
            status, expected = f"out of scope ({outcome})", True
        elif outcome == "skipped":
            status, expected = "skipped", True
        elif (kind, outcome) in _STATUS:
            status, expected = _STATUS[(kind, outcome)]
        elif kind == "public":
            status, expected = "FAILED", False
        else:  # a deviation or pending test erroring counts as failing
            status, expected = kind, True
        outcomes.append(Outcome(test_id, kind, outcome, status, expected, reason, result.get("message", "")))
    return outcomes


def file_rows(outcomes: Sequence[Outcome], totals: Mapping[str, int]) -> list[FileRow]:
    """Per test file: public tests (passed + failed), passed, failed, deviations, pending, skipped, out of
    scope (the file's total in ``totals`` less the tests run that are not), and whether it imported."""
    rows = {name: FileRow(name, dict.fromkeys(COLUMNS, 0)) for name in totals}
    run: dict[str, int] = {}
    for o in outcomes:
        name = o.test_id.split("::")[0]
        counts = rows.setdefault(name, FileRow(name, dict.fromkeys(COLUMNS, 0))).counts
        if o.kind == "file":
            counts["import error"] += 1
            continue
        if o.kind == "out":
            continue
        run[name] = run.get(name, 0) + 1
        if o.status == "skipped":
            counts["skipped"] += 1
        elif o.kind == "public":
            counts["public"] += 1
            counts["passed" if o.outcome == "passed" else "failed"] += 1
        else:
            counts[o.kind] += 1
    for name, row in rows.items():
        if not row.counts["import error"]:
            row.counts["out of scope"] = max(0, totals.get(name, 0) - run.get(name, 0))
    return [rows[name] for name in sorted(rows)]


def format_table(rows: Sequence[FileRow]) -> str:
    """The per-file table with a total row."""
    total = FileRow("total", {c: sum(r.counts[c] for r in rows) for c in COLUMNS})
    width = max(len(r.name) for r in [*rows, total])
    lines = ["  ".join([f"{'test file':<{width}}", *(f"{c:>{max(len(c), 6)}}" for c in COLUMNS)])]
    for row in [*rows, total]:
        lines.append("  ".join([f"{row.name:<{width}}", *(f"{row.counts[c]:>{max(len(c), 6)}}" for c in COLUMNS)]))
    lines.insert(-1, "-" * len(lines[0]))
    return "\n".join(lines)


def stale_patterns(run: RunResults, scope: Scope) -> list[str]:
    """Patterns of the scope lists that match no test (a list out of date). Patterns of files that did
    not import are not judged (none of their tests was collected); ``<file>::*`` patterns of files left
    out whole match."""
    seen = [*run.results, *run.deselected]
    broken = {t for t in run.results if "::" not in t}
    every = {**scope.out_of_scope, **scope.deviations, **scope.pending}
    return [p for p in every if p.split("::")[0] not in broken
            and not (p.endswith("::*") and p.split("::")[0] in run.ignored_files)
            and not any(matches(t, p) for t in seen)]


def report(outcomes: Sequence[Outcome], rows: Sequence[FileRow], *, stale: Sequence[str] = (),
           listing: bool = False) -> tuple[str, int]:
    """The printed report and the exit status (0: every outcome expected, 1: not)."""
    parts = [format_table(rows)]
    unexpected = [o for o in outcomes if not o.expected]
    if listing:
        parts.append("\nevery test run:")
        parts += [f"  {o.status:<10} {o.test_id}" + (f"\n             {o.message}" if o.message else "")
                  for o in outcomes]
    if unexpected:
        parts.append(f"\n{len(unexpected)} unexpected outcome(s):")
        parts += [f"  {o.status}: {o.test_id}" + (f"\n      {o.message}" if o.message else "") for o in unexpected]
    out = [o for o in outcomes if o.kind == "out" and "::" in o.test_id]
    out_files = [o for o in outcomes if o.kind == "out" and "::" not in o.test_id]
    if out or out_files:
        parts.append(f"\nout of scope, run for information: {sum(o.outcome == 'passed' for o in out)} of "
                     f"{len(out)} tests pass; {len(out_files)} files do not import")
    if stale:
        parts.append("\nscope patterns matching no test (update tests/conformance/scope.py):")
        parts += [f"  {p}" for p in stale]
    total = {c: sum(r.counts[c] for r in rows) for c in COLUMNS}
    in_scope = total["public"] + total["deviation"] + total["pending"]
    parts.append(f"\nconformance: {total['passed']} of {in_scope} in-scope CoMLRL 1.4.3 tests pass through {PREFIX}; "
                 f"{total['deviation']} documented deviations, {total['pending']} pending, "
                 f"{total['out of scope']} out of scope" + ("" if not unexpected and not stale else " -- NOT AS EXPECTED"))
    return "\n".join(parts), 1 if unexpected or stale else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.conformance.runner", description=__doc__.split("\n\n")[0])
    parser.add_argument("--sdist", type=Path, help=f"a downloaded {SDIST_NAME} instead of downloading it")
    parser.add_argument("--keep", type=Path, help="prepare and run in this directory and keep it")
    parser.add_argument("--all", action="store_true", help="run the out-of-scope tests too (not counted)")
    parser.add_argument("--list", action="store_true", help="list every test run with its status")
    parser.add_argument("--json", type=Path, help="write every test's status to this JSON file")
    args, pytest_args = parser.parse_known_args(argv)  # the rest goes to pytest (e.g. -k reward)
    scope = Scope.from_module()
    workdir = args.keep or Path(tempfile.mkdtemp(prefix="cooplab-conformance-"))
    try:
        workdir.mkdir(parents=True, exist_ok=True)
        sdist = args.sdist or fetch_sdist(workdir / "download")
        verify_sha256(sdist)
        if (workdir / "tests").exists():
            shutil.rmtree(workdir / "tests")
        changed = prepare(sdist, workdir)
        print(f"conformance: CoMLRL 1.4.3's tests in {workdir}/tests, {changed} import lines pointed at {PREFIX}",
              flush=True)
        run = run_pytest(workdir, out_of_scope=list(scope.out_of_scope), run_all=args.all, extra_args=pytest_args)
    except ConformanceError as exc:
        print(f"conformance: {exc}", file=sys.stderr)
        return 2
    finally:
        if args.keep is None:
            shutil.rmtree(workdir, ignore_errors=True)
    outcomes = classify(run.results, scope)
    if args.json:
        args.json.write_text(json.dumps([o.__dict__ for o in outcomes], indent=1))
    totals = {} if pytest_args else dict(scope_lists.TESTS_PER_FILE)
    stale = stale_patterns(run, scope) if not pytest_args and not args.all else []
    text, status = report(outcomes, file_rows(outcomes, totals), stale=stale, listing=args.list)
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
