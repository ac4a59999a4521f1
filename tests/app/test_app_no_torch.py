"""Importing the dashboard, and rendering every page of it, never imports torch or transformers."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import importlib, pkgutil, sys
from pathlib import Path
import app, app.components
modules = []
for package in (app, app.components):
    for info in pkgutil.iter_modules(package.__path__):
        if package is app and info.name in ("main", "app_pages"):
            continue  # scripts run by Streamlit, covered below through AppTest
        modules.append(f"{package.__name__}.{info.name}")
for name in modules:
    importlib.import_module(name)
import jobs.client  # what the dashboard calls to launch and stop runs
from app import actor_critic_settings  # reads IACConfig/MAACConfig defaults without the trainers
from app import draft as drafts  # checks a draft with the build's own rules, torch-free
assert actor_critic_settings.defaults("iac")
assert drafts.validate({"agents": [{"name": "a", "model": "builtin:tiny-llama"}], "task": {"name": "quickstart"},
                        "trainer": {"algorithm": "maac", "clip_epsilon": 0.2}})[1]["trainer.clip_epsilon"]
from streamlit import config
from streamlit.testing.v1 import AppTest
config.set_option("server.address", "127.0.0.1")  # as `cooplab ui` serves it: no sign-in
pages = sorted(p.name for p in Path("app/app_pages").glob("*.py"))
for page in pages:
    at = AppTest.from_file("app/main.py", default_timeout=60)
    at.switch_page(f"app_pages/{page}")
    at.run()
    assert not at.exception, (page, [e.value for e in at.exception])
heavy = sorted(m for m in ("torch", "transformers") if m in sys.modules)
print("modules", len(modules), "pages", len(pages), "heavy", heavy)
"""


@pytest.mark.slow
def test_app_never_imports_torch(tmp_path: Path) -> None:
    env = {"COOPLAB_HOME": str(tmp_path / "home"), "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)}
    result = subprocess.run([sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True,
                            timeout=180)
    assert result.returncode == 0, result.stderr[-3000:]
    summary = [line for line in result.stdout.splitlines() if line.startswith("modules")]
    assert summary, result.stdout
    _, n_modules, _, n_pages, _, *heavy = summary[0].split(" ", 5)
    assert int(n_modules) >= 15 and int(n_pages) == 7
    assert heavy == ["[]"], f"the dashboard imported {heavy}"
