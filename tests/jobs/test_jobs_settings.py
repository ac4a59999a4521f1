"""The timing settings derived from the heartbeat timeout and the stop grace period; the task module
allowlist and the Hugging Face cache the pre-flight checks look in."""

from __future__ import annotations

import pytest

from jobs.settings import Settings


@pytest.mark.parametrize(
    ("timeout_s", "grace_s", "heartbeat_s", "maintenance_s"),
    [
        (60.0, 30.0, 10.0, 7.5),  # defaults: beat every 10 s (capped), check every 30/4 s
        (8.0, 30.0, 2.0, 2.0),  # short timeout: a quarter of it for both
        (0.4, 30.0, 0.2, 0.2),  # never faster than 0.2 s
        (3600.0, 600.0, 10.0, 10.0),  # never slower than 10 s
        (20.0, 0.0, 5.0, 5.0),  # no grace period: the timeout decides
    ],
)
def test_intervals_follow_the_timeouts(tmp_path, timeout_s, grace_s, heartbeat_s, maintenance_s):
    settings = Settings(home=tmp_path, heartbeat_timeout_s=timeout_s, stop_grace_s=grace_s)
    assert settings.heartbeat_interval_s == pytest.approx(heartbeat_s)
    assert settings.maintenance_interval_s == pytest.approx(maintenance_s)


def test_task_modules_come_from_a_comma_separated_setting(monkeypatch):
    from jobs.settings import operator_permissions

    monkeypatch.setenv("COOPLAB_TASK_MODULES", " mylab.tasks, otherpkg ,")
    settings = Settings()
    assert settings.task_module_list == ("mylab.tasks", "otherpkg")
    assert operator_permissions(settings).task_modules == ("mylab.tasks", "otherpkg")
    assert Settings(task_modules="").task_module_list == ()
    monkeypatch.setenv("COOPLAB_TASK_MODULES", "os:system")
    with pytest.raises(ValueError, match="'os:system' is not a module name"):
        Settings()


def test_the_hub_cache_resolves_like_huggingface_hub(tmp_path, monkeypatch):
    from jobs.settings import hf_hub_cache_dirs

    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hf_hub_cache_dirs() == [tmp_path / ".cache" / "huggingface" / "hub"]
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hf_hub_cache_dirs() == [tmp_path / "xdg" / "huggingface" / "hub"]
    monkeypatch.setenv("HF_HOME", str(tmp_path / "h"))
    assert hf_hub_cache_dirs() == [tmp_path / "h" / "hub"]
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "c"))
    assert hf_hub_cache_dirs() == Settings().preflight_hub_cache_dirs() == [tmp_path / "c"]
    assert Settings(require_cached_models=False).preflight_hub_cache_dirs() is None


def test_the_unsafe_sandbox_switch_is_off_unless_the_operator_sets_it(monkeypatch):
    from jobs.settings import get_settings, operator_permissions

    monkeypatch.delenv("COOPLAB_UNSAFE_SANDBOX_WITHOUT_ISOLATION", raising=False)
    assert operator_permissions(get_settings()).unisolated_sandbox is False
    monkeypatch.setenv("COOPLAB_UNSAFE_SANDBOX_WITHOUT_ISOLATION", "1")
    assert operator_permissions(get_settings()).unisolated_sandbox is True
