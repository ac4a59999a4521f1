"""The timing settings derived from the heartbeat timeout and the stop grace period."""

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
