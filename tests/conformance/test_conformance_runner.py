"""The conformance runner's own parts (no download, no CoMLRL): rewriting imports, judging outcomes
against the scope lists, the report and its exit status, and refusing a wrong or missing sdist."""

from __future__ import annotations

import io
import sys
import tarfile

import pytest

from tests.conformance import scope as scope_lists
from tests.conformance.plugin import matches
from tests.conformance.runner import (
    ConformanceError,
    RunResults,
    Scope,
    classify,
    extract_tests,
    fetch_sdist,
    file_rows,
    report,
    rewrite_imports,
    stale_patterns,
    verify_sha256,
)

SCOPE = Scope(out_of_scope={"test_a.py::test_private*": "private", "test_b.py::*": "internals"},
              deviations={"test_a.py::test_dev[x=1]": "on purpose"}, pending={"test_a.py::test_todo": "later"})


def test_only_comlrl_imports_are_rewritten() -> None:
    source = ("from comlrl.trainers.reinforce import (\n    MAGRPOTrainer,\n)\nimport comlrl.utils.checkpoint as ck\n"
              "def f():\n    from comlrl.utils import x\nimport comlrl\nimport comlrl.utils\nimport comlrlx\n"
              "text = 'from comlrl import y'\nfrom helpers import comlrl_thing\n")
    rewritten, count = rewrite_imports(source)
    assert count == 5
    assert rewritten.splitlines() == [
        "from engine.comlrl.trainers.reinforce import (", "    MAGRPOTrainer,", ")",
        "import engine.comlrl.utils.checkpoint as ck", "def f():", "    from engine.comlrl.utils import x",
        "import engine.comlrl as comlrl", "import engine.comlrl.utils; import engine.comlrl as comlrl",
        "import comlrlx", "text = 'from comlrl import y'", "from helpers import comlrl_thing"]


def test_an_import_form_the_rewrite_does_not_know_is_refused() -> None:
    with pytest.raises(ConformanceError, match="not rewritten"):
        rewrite_imports("import os, comlrl\n")


def test_patterns_take_brackets_literally_and_cover_parametrizations() -> None:
    assert matches("t.py::test_x[a=1]", "t.py::test_x")
    assert matches("t.py::test_x[MAGRPOConfig(p='auto')]", "t.py::test_x[*p='auto')]")
    assert not matches("t.py::test_x[b]", "t.py::test_x[a]")
    assert SCOPE.kind("test_b.py::test_anything[1]") == ("out", "internals")
    assert SCOPE.kind("test_a.py::test_public") == ("public", "")


def test_every_outcome_as_expected_exits_zero() -> None:
    results = {"test_a.py::test_ok": {"outcome": "passed"}, "test_a.py::test_dev[x=1]": {"outcome": "failed"},
               "test_a.py::test_todo": {"outcome": "failed", "message": "later"}}
    outcomes = classify(results, SCOPE)
    rows = file_rows(outcomes, {"test_a.py": 5, "test_b.py": 4})
    text, status = report(outcomes, rows)
    assert status == 0
    assert [r.counts["public"] for r in rows] == [1, 0] and [r.counts["out of scope"] for r in rows] == [2, 4]
    assert "1 of 3 in-scope CoMLRL 1.4.3 tests pass through engine.comlrl; 1 documented deviations, 1 pending, " \
           "6 out of scope" in text and "NOT AS EXPECTED" not in text


@pytest.mark.parametrize(("test_id", "outcome", "status"), [
    ("test_a.py::test_ok", "failed", "FAILED"),
    ("test_a.py::test_todo", "passed", "pending passes: take it off PENDING"),
    ("test_a.py::test_dev[x=1]", "passed", "deviation passes: take it off DEVIATIONS"),
    ("test_a.py", "error", "file does not import"),
])
def test_an_unexpected_outcome_exits_one_and_is_listed(test_id: str, outcome: str, status: str) -> None:
    outcomes = classify({test_id: {"outcome": outcome, "message": "why"}}, SCOPE)
    text, code = report(outcomes, file_rows(outcomes, {"test_a.py": 3}))
    assert code == 1 and f"{status}: {test_id}\n      why" in text and "NOT AS EXPECTED" in text


def test_an_out_of_scope_file_that_does_not_import_is_information_only() -> None:
    outcomes = classify({"test_b.py": {"outcome": "error", "message": "private name"}}, SCOPE)
    text, code = report(outcomes, file_rows(outcomes, {"test_b.py": 4}))
    assert code == 0 and outcomes[0].status == "out of scope (file does not import)"
    assert "out of scope, run for information: 0 of 0 tests pass; 1 files do not import" in text


def test_a_pattern_matching_no_test_is_reported() -> None:
    run = RunResults(results={"test_a.py::test_ok": {"outcome": "passed"}}, deselected=["test_a.py::test_private1"],
                     ignored_files=["test_b.py"])
    assert stale_patterns(run, SCOPE) == ["test_a.py::test_dev[x=1]", "test_a.py::test_todo"]
    broken = RunResults(results={"test_a.py": {"outcome": "error"}}, ignored_files=["test_b.py"])
    assert stale_patterns(broken, SCOPE) == []  # nothing of a file that does not import was collected


def test_the_scope_lists_fit_comlrl_1_4_3() -> None:
    assert sum(scope_lists.TESTS_PER_FILE.values()) == 720
    for pattern in [*scope_lists.OUT_OF_SCOPE, *scope_lists.DEVIATIONS, *scope_lists.PENDING]:
        assert pattern.split("::")[0] in scope_lists.TESTS_PER_FILE, pattern
    assert all(reason.strip() for lists in (scope_lists.OUT_OF_SCOPE, scope_lists.DEVIATIONS, scope_lists.PENDING)
               for reason in lists.values())


def test_a_changed_or_missing_sdist_is_refused(tmp_path) -> None:
    other = tmp_path / "comlrl-1.4.3.tar.gz"
    other.write_bytes(b"not the release")
    with pytest.raises(ConformanceError, match="SHA-256 .* expected 28ecab40"):
        verify_sha256(other)
    with pytest.raises(ConformanceError, match="could not download comlrl==1.4.3's source distribution .*no network"):
        fetch_sdist(tmp_path / "download", pip=[sys.executable, "-c", "import sys; sys.exit('no network')"])


def test_only_the_tests_folder_is_unpacked(tmp_path) -> None:
    sdist = tmp_path / "s.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        for name, data in (("comlrl-1.4.3/tests/test_x.py", b"x = 1\n"), ("comlrl-1.4.3/comlrl/a.py", b"")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    tests = extract_tests(sdist, tmp_path / "work")
    assert [p.name for p in tests.iterdir()] == ["test_x.py"] and not (tmp_path / "work" / "comlrl").exists()
