"""The project's shape: import boundaries, the CLI skeleton, settings and docker-compose.

Style (ruff) is not a test: ``make lint`` checks it, and ``.ci/run`` runs it before the suite."""

from __future__ import annotations

import importlib
import os
import pkgutil
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]


def _run(args: list[str], **kwargs) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=300, **kwargs)


def _tool(name: str) -> str:
    found = Path(sys.executable).with_name(name)
    return str(found) if found.exists() else (shutil.which(name) or name)


def test_import_contracts_hold():
    result = _run([_tool("lint-imports"), "--no-cache"])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "broken" not in result.stdout.lower() or "0 broken" in result.stdout.lower()


def _all_modules(package: str) -> list[str]:
    pkg = importlib.import_module(package)
    names = [package]
    for info in pkgutil.walk_packages(pkg.__path__, prefix=f"{package}."):
        if ".migrations." in info.name or info.name.endswith(".migrations"):
            continue
        names.append(info.name)
    return names


@pytest.mark.parametrize("package", ["app", "db"])
def test_package_imports_never_load_torch(package):
    code = (
        "import importlib, sys\n"
        f"from tests.foundation.test_layout import _all_modules\n"
        f"mods = _all_modules({package!r})\n"
        "for m in mods:\n"
        "    if m.endswith('__main__') or m.split('.')[-1] in ('main',) or '.pages.' in m or '.views.' in m:\n"
        "        continue\n"
        "    importlib.import_module(m)\n"
        "bad = sorted(k for k in ('torch', 'transformers') if k in sys.modules)\n"
        "assert not bad, f'importing {len(mods)} modules loaded {bad}'\n"
        "print(len(mods))\n"
    )
    result = _run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert int(result.stdout.strip().splitlines()[-1]) >= 1


def test_client_and_spec_do_not_load_torch():
    code = (
        "import sys, engine.schema.run_config, jobs.settings\n"
        "import importlib.util\n"
        "if importlib.util.find_spec('jobs.client'):\n"
        "    import jobs.client\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
        "print('clean')\n"
    )
    result = _run([sys.executable, "-c", code], env={**os.environ, "PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == "clean"


def test_cli_version_and_help():
    version = _run([sys.executable, "-m", "cooplab", "--version"])
    assert version.returncode == 0, version.stderr
    from cooplab import __version__

    assert version.stdout.strip() == f"cooplab {__version__}"
    helptext = _run([sys.executable, "-m", "cooplab", "--help"])
    assert helptext.returncode == 0, helptext.stderr
    assert "Usage" in helptext.stdout


def _cli_commands() -> dict:
    import typer

    from cooplab.cli import app

    return typer.main.get_command(app).commands  # type: ignore[attr-defined]


def test_docker_compose_names_real_entry_points_and_settings():
    from jobs.settings import Settings

    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    services = compose["services"]
    assert {"redis", "postgres", "app"} <= set(services)
    assert any(name.startswith("worker") for name in services)
    commands = _cli_commands()
    fields = {f"COOPLAB_{name.upper()}" for name in Settings.model_fields}
    checked = 0
    for name, service in services.items():
        command = service.get("command") or []
        if command and command[0] == "cooplab":
            assert command[1] in commands, f"service {name}: `cooplab {command[1]}` is not a command"
            options = {opt for param in commands[command[1]].params for opt in param.opts}
            for word in command[2:]:
                if word.startswith("--"):
                    assert word in options, f"service {name}: `cooplab {command[1]}` has no option {word}"
            checked += 1
        for var in service.get("environment") or {}:
            if var.startswith("COOPLAB_"):
                assert var in fields, f"service {name}: {var} is not a setting ({sorted(fields)})"
    assert checked >= 2
    worker = next(s for n, s in services.items() if n.startswith("worker"))
    assert "CUDA_VISIBLE_DEVICES" in worker["environment"]
    assert worker["deploy"]["resources"]["reservations"]["devices"][0]["capabilities"] == ["gpu"]


def _required(value: str, var: str) -> bool:
    """Whether ``value`` takes ``var`` from the environment with no default (``${VAR:?message}``)."""
    return re.search(r"\$\{" + var + r":\?[^}]*\}", value) is not None and "${" + var + ":-" not in value


def test_docker_compose_keeps_servers_private_and_secrets_out_of_the_file():
    text = (ROOT / "docker-compose.yml").read_text()
    services = yaml.safe_load(text)["services"]
    for name in ("redis", "postgres"):  # reachable by the other services only, never from the host
        assert "ports" not in services[name] and "network_mode" not in services[name], name
    postgres = services["postgres"]["environment"]
    assert _required(postgres["POSTGRES_PASSWORD"], "POSTGRES_PASSWORD")
    redis = services["redis"]["command"]
    assert _required(redis[redis.index("--requirepass") + 1], "REDIS_PASSWORD")
    for name, service in services.items():
        env = service.get("environment") or {}
        for var in ("COOPLAB_BROKER_URL", "COOPLAB_RESULT_BACKEND"):
            if var in env:
                assert env[var].startswith("redis://:${REDIS_PASSWORD") and _required(env[var], "REDIS_PASSWORD")
        if "COOPLAB_DATABASE_URL" in env:
            assert _required(env["COOPLAB_DATABASE_URL"], "POSTGRES_PASSWORD"), name
    app = services["app"]
    assert "0.0.0.0" in app["command"]  # reachable from other machines, hence the sign-in
    assert _required(app["environment"]["COOPLAB_UI_PASSWORD_HASH"], "COOPLAB_UI_PASSWORD_HASH")
    assert "cooplab:cooplab@" not in text and not re.search(r"PASSWORD:\s*['\"]?\w", text)


def test_settings_read_the_environment_when_asked(monkeypatch, tmp_path):
    from jobs.settings import get_settings

    monkeypatch.delenv("COOPLAB_DATABASE_URL", raising=False)
    monkeypatch.delenv("COOPLAB_BROKER_URL", raising=False)
    monkeypatch.setenv("COOPLAB_HOME", str(tmp_path / "home"))
    settings = get_settings()
    assert settings.data_dir == (tmp_path / "home").resolve()
    assert settings.resolved_database_url == f"sqlite:///{tmp_path / 'home' / 'cooplab.db'}"
    assert settings.resolved_broker_url.startswith("filesystem://")
    settings.ensure_dirs()
    assert (tmp_path / "home" / "broker").is_dir()

    monkeypatch.setenv("COOPLAB_BROKER_URL", "redis://example:6379/0")
    monkeypatch.setenv("COOPLAB_DATABASE_URL", "postgresql+psycopg2://u@h/db")
    settings = get_settings()
    assert settings.resolved_broker_url == "redis://example:6379/0"
    assert settings.resolved_result_backend == "redis://example:6379/0"
    assert settings.resolved_database_url == "postgresql+psycopg2://u@h/db"


def test_settings_module_reads_nothing_at_import():
    source = (ROOT / "jobs" / "settings.py").read_text()
    assert "Settings()" in source.split("def get_settings", 1)[1]
    assert "os.environ" not in source


def test_the_image_and_the_workers_can_run_the_code_sandbox():
    import yaml

    assert "bubblewrap" in (ROOT / "Dockerfile").read_text(encoding="utf-8")
    services = yaml.safe_load((ROOT / "docker-compose.yml").read_text(encoding="utf-8"))["services"]
    workers = [s for name, s in services.items() if name.startswith("worker")]
    assert workers and all("seccomp=unconfined" in w.get("security_opt", []) for w in workers)
    assert "security_opt" not in services["app"]  # only the workers run model-written code


def test_the_trainer_package_reads_in_a_few_files():
    """engine/trainer/ is grouped by concept (the algorithm and its advantages in magrpo.py, the loss
    arithmetic in losses.py): a new module joins the file of its concept rather than adding a small one."""
    files = sorted(p.name for p in (ROOT / "engine" / "trainer").glob("*.py"))
    assert "magrpo.py" in files
    assert len(files) <= 15, f"engine/trainer/ has {len(files)} files: {files}"
