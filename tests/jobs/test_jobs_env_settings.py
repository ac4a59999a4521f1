"""Settings from the environment (jobs.env_settings) read as pydantic-settings read them: the prefixed
name in any case, keyword arguments first, values validated as given, defaults validated too."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import ValidationError

from jobs.settings import HubCacheEnv, Settings


def test_fields_come_from_keywords_then_the_environment_then_defaults(monkeypatch, tmp_path):
    for key in [k for k in __import__("os").environ if k.upper().startswith("COOPLAB_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("cooplab_heartbeat_timeout_s", "7.5")  # any case
    monkeypatch.setenv("COOPLAB_ALLOW_REMOTE_CODE", "yes")
    monkeypatch.setenv("COOPLAB_HOME", str(tmp_path))
    monkeypatch.setenv("COOPLAB_NOT_A_SETTING", "x")  # ignored
    settings = Settings(stop_grace_s=3)
    assert (settings.heartbeat_timeout_s, settings.allow_remote_code, settings.home) == (7.5, True, tmp_path)
    assert settings.stop_grace_s == 3 and Settings(heartbeat_timeout_s=9).heartbeat_timeout_s == 9
    assert settings.log_level == "INFO" and settings.job_threads is None
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    assert HubCacheEnv().hf_home == str(tmp_path / "hf")


def test_a_bad_value_is_refused_naming_the_setting(monkeypatch):
    monkeypatch.setenv("COOPLAB_JOB_THREADS", "many")
    with pytest.raises(ValidationError, match="job_threads"):
        Settings()
    monkeypatch.delenv("COOPLAB_JOB_THREADS")
    monkeypatch.setenv("COOPLAB_DATA_ROOTS", "relative/path")  # a validator runs on environment values
    with pytest.raises(ValidationError, match="is not an absolute path"):
        Settings()


def test_reading_the_settings_imports_no_pydantic_settings():
    code = "import sys; from jobs.settings import get_settings; get_settings(); print('pydantic_settings' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.strip() == "False", result.stderr
