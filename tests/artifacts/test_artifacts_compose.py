"""docker-compose.yml's artifact store: private to the services, its keys only from the environment,
and every CoopLab service pointed at it."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def test_the_compose_store_is_private_and_its_keys_come_from_the_environment():
    text = (ROOT / "docker-compose.yml").read_text(encoding="utf-8")
    services = yaml.safe_load(text)["services"]
    store = services["s3"]
    assert "ports" not in store and "network_mode" not in store
    assert "-master.telemetry=false" in store["command"]
    keys = {"AWS_ACCESS_KEY_ID": "S3_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY": "S3_SECRET_ACCESS_KEY"}
    for var, source in keys.items():
        assert re.fullmatch(r"\$\{" + source + r":\?[^}]+\}", store["environment"][var])
    users = [s for name, s in services.items() if name.startswith(("worker", "app"))]
    assert len(users) >= 2
    for service in users:
        env = service["environment"]
        assert (
            env["COOPLAB_ARTIFACTS_URL"].startswith("s3://") and env["AWS_ENDPOINT_URL"] == "http://s3:8333"
        )
        assert all(env[var] == store["environment"][var] for var in keys) and "s3" in service["depends_on"]
    example = (ROOT / ".env.example").read_text(encoding="utf-8")
    assert all(re.search(rf"^{source}=$", example, re.M) for source in keys.values())
