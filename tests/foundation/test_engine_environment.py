"""The engine reads no environment variables: the process that owns a run (``jobs.settings``, the job
executor, the CLI) reads them and hands the engine what it needs as arguments.

One lookup stays, for library use only: a script that hands the engine no API keys names its
comparator's key by a variable of its own environment, as CoMLRL's ``comparator_api_key_env`` does
(:meth:`engine.permissions.operator.OperatorPermissions.api_key` of a value holding no keys); no CoopLab process
reaches it: the job executor and ``cooplab train`` hand their keys over.
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENVIRONMENT = ("environ", "environb", "getenv", "getenvb", "putenv", "unsetenv")
LIBRARY_USE_ONLY = {"engine/permissions/operator.py": 1}  # reads per file: CoMLRL's comparator_api_key_env


def environment_reads(source: str) -> list[int]:
    """Line numbers where ``source`` touches the process environment: ``os.environ``, ``os.getenv``
    (and their bytes and writing forms), or any of them imported from ``os`` by name."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute):
            found = node.attr in ENVIRONMENT and isinstance(node.value, ast.Name) and node.value.id in ("os", "posix")
        elif isinstance(node, ast.ImportFrom):
            found = node.module in ("os", "posix") and any(alias.name in ENVIRONMENT for alias in node.names)
        else:
            found = False
        if found:
            lines.append(node.lineno)
    return sorted(lines)


def test_environment_reads_are_found_in_every_form():
    source = (
        "import os\n"
        "from os import environ as env, getenv\n"
        "a = os.environ['A']\n"
        "b = os.getenv('B')\n"
        "c = env.get('C')\n"
        "os.environb\n"
        "path = os.path.join('x', 'y')\n"  # not the environment
        "environ = {}\n"  # a local name is not the process environment
    )
    assert environment_reads(source) == [2, 3, 4, 6]


def test_the_engine_reads_no_environment():
    found = {
        path.relative_to(ROOT).as_posix(): lines
        for path in sorted((ROOT / "engine").rglob("*.py"))
        if (lines := environment_reads(path.read_text(encoding="utf-8")))
    }
    assert {path: len(lines) for path, lines in found.items()} == LIBRARY_USE_ONLY, found


def test_keys_the_owner_hands_over_replace_the_environment(monkeypatch):
    """Once the process's owner handed its keys, the engine looks a key up among them only; a script
    that handed none reads the variable its config names, as CoMLRL does."""
    from engine.permissions.operator import LIBRARY, OperatorPermissions

    monkeypatch.setenv("COOPLAB_API_KEY_OTHER", "sk-environment")
    handed = OperatorPermissions(api_keys={"COOPLAB_API_KEY_LAB": "sk-lab", "COOPLAB_API_KEY_EMPTY": "",
                                           "DATABASE_URL": "postgresql://secret"})
    assert handed.api_keys == {"COOPLAB_API_KEY_LAB": "sk-lab"}  # no other variable of the owner is kept
    assert (handed.api_key("COOPLAB_API_KEY_LAB"), handed.api_key("COOPLAB_API_KEY_OTHER")) == ("sk-lab", None)
    assert LIBRARY.api_key("COOPLAB_API_KEY_OTHER") == "sk-environment"  # library use: nothing handed


def test_a_run_sends_the_key_its_owner_handed_over_not_the_environment(monkeypatch, tmp_path):
    """The comparator of a built run config sends the key the process's owner handed over (as the job
    executor and ``cooplab train`` do), whatever the environment holds."""
    from engine.build.run import build_trainer
    from engine.permissions.operator import OperatorPermissions
    from engine.schema.run_config import parse_run_config
    from tests.engine.preference.api_listener import Listener

    variable = "COOPLAB_API_KEY_TESTLAB"
    monkeypatch.setenv(variable, "sk-from-the-environment")
    listener = Listener()
    try:
        handed = OperatorPermissions(api_hosts=f"{variable}=127.0.0.1:{listener.port}",
                                     api_keys={variable: "sk-handed-over"})
        config = parse_run_config({
            "agents": [{"name": "a"}, {"name": "b"}], "task": {"name": "quickstart"},
            "trainer": {"algorithm": "madpo_iter", "comparator_policy": "api", "comparator_api_url": listener.url,
                        "comparator_api_key_env": variable, "num_iterations": 1, "max_steps": 1,
                        "preference_num_candidates": 2, "max_new_tokens": 4, "items_per_step": 1,
                        "train_batch_size": 1, "eval_interval": 0, "checkpoint_interval": 0}})
        trainer = build_trainer(config, output_dir=tmp_path, permissions=handed)
        assert trainer._api_client.completions("Count:", 1) == ["12"]
        assert listener.authorizations() == ["Bearer sk-handed-over"]
    finally:
        listener.close()
