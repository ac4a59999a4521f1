"""Where a run config may send the API comparator's requests and the operator's keys
(:mod:`engine.permissions.outbound`): real HTTP listeners on 127.0.0.1, a run config checked in pre-flight and
built and trained by the engine; nothing leaves the machine."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.permissions.operator import OperatorPermissions
from engine.permissions.outbound import (
    ApiHosts,
    Endpoint,
    OutboundRefused,
    address_kind,
    address_problem,
    checked_target,
    parse_api_hosts,
    url_problem,
)
from engine.preference.api_client import ApiClient, ComparatorApiError
from engine.preference.api_settings import ApiSettings
from engine.schema.preflight import preflight_problems
from engine.schema.run_config import ConfigError, parse_run_config
from tests.engine.preference.api_listener import Listener

KEY = "sk-live-OPERATOR-0123456789"
VARIABLE = "COOPLAB_API_KEY_TESTLAB"


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


OPERATOR = OperatorPermissions(api_hosts=ApiHosts())
"""A CoopLab process's permissions: an empty listing (no COOPLAB_API_HOSTS), the key from its environment."""


def listing(text: str) -> OperatorPermissions:
    """The permissions of an operator whose COOPLAB_API_HOSTS is ``text``."""
    return OperatorPermissions(api_hosts=text)


@pytest.fixture(autouse=True)
def _operator(monkeypatch: pytest.MonkeyPatch) -> None:
    """The operator's key in the environment."""
    monkeypatch.setenv(VARIABLE, KEY)


def run_config(url: str, **trainer: Any) -> dict[str, Any]:
    return {"agents": [{"name": "a"}, {"name": "b"}], "task": {"name": "quickstart"},
            "trainer": {"algorithm": "madpo_iter", "comparator_policy": "api", "comparator_api_url": url,
                        "comparator_api_key_env": VARIABLE, "num_iterations": 1, "max_steps": 1,
                        "preference_num_candidates": 2, "max_new_tokens": 4, "items_per_step": 1,
                        "train_batch_size": 1, "eval_interval": 0, "checkpoint_interval": 0, **trainer}}


def problems_of(config: dict[str, Any], hosts: ApiHosts | None = None) -> dict[str, str]:
    return {p.field: p.message for p in preflight_problems(parse_run_config(config), hub_cache_dirs=[],
                                                           permissions=OperatorPermissions(api_hosts=hosts or ApiHosts()))}


# -- the setting --------------------------------------------------------------------------------------------

def test_the_setting_binds_keys_to_hosts_and_lists_keyless_hosts() -> None:
    hosts = parse_api_hosts(" COOPLAB_API_KEY_OPENAI=api.openai.com , COOPLAB_API_KEY_LAB=LLM.lab.internal:8000,"
                            "COOPLAB_API_KEY_LAB=[fd00::1]:9000, vllm.local:8001,,10.0.0.5")
    assert hosts.keys["COOPLAB_API_KEY_OPENAI"] == {Endpoint("api.openai.com")}
    assert hosts.keys["COOPLAB_API_KEY_LAB"] == {Endpoint("llm.lab.internal", 8000), Endpoint("fd00::1", 9000)}
    assert hosts.open == {Endpoint("vllm.local", 8001), Endpoint("10.0.0.5")}
    assert hosts.bound("COOPLAB_API_KEY_OPENAI", "api.openai.com", 443, 443)
    assert not hosts.bound("COOPLAB_API_KEY_OPENAI", "api.openai.com", 8443, 443)  # no port: the scheme's only
    assert not hosts.bound("COOPLAB_API_KEY_LAB", "api.openai.com", 443, 443)
    assert hosts.listed("vllm.local", 8001, 80) and hosts.listed("llm.lab.internal", 8000, 80)
    assert hosts.hosts_of("COOPLAB_API_KEY_LAB") == ["[fd00::1]:9000", "llm.lab.internal:8000"]
    assert parse_api_hosts("") == ApiHosts() and parse_api_hosts(None) == ApiHosts()


@pytest.mark.parametrize(("text", "message"), [
    ("COOPLAB_API_KEY_X=http://h", "'http://h' is not a host or host:port"),
    ("h:99999", "is not a host or host:port"),
    ("user@h", "is not a host or host:port"),
    ("::1", "IPv6 in brackets"),
    ("lower=h", "'lower' is not an environment variable name"),
])
def test_a_bad_entry_is_named(text: str, message: str) -> None:
    with pytest.raises(ValueError, match="COOPLAB_API_HOSTS entry") as info:
        parse_api_hosts(text)
    assert message in str(info.value)


# -- the checks, by hand --------------------------------------------------------------------------------

@pytest.mark.parametrize(("address", "kind"), [
    ("127.0.0.1", "a loopback address"), ("::1", "a loopback address"), ("10.1.2.3", "a private address"),
    ("192.168.0.10", "a private address"), ("172.16.0.1", "a private address"),
    ("169.254.169.254", "a link-local address"), ("fe80::1", "a link-local address"),
    ("0.0.0.0", "an unspecified address"), ("224.0.0.251", "a multicast address"),
    ("240.0.0.1", "a reserved address"), ("100.64.0.1", "a non-global address"),
    ("::ffff:127.0.0.1", "a loopback address inside IPv6"), ("64:ff9b::a00:1", "a private address inside IPv6"),
    ("fd00::1", "a private address"), ("8.8.8.8", None), ("2606:4700:4700::1111", None),
])
def test_address_kinds(address: str, kind: str | None) -> None:
    assert address_kind(address) == kind


@pytest.mark.parametrize(("address", "kind"), [
    # 6to4 (2002::/16) carries an IPv4 address in bits 16-47: it is judged as that address
    ("2002:7f00:1::1", "a loopback address inside 6to4"), ("2002:a00:1::1", "a private address inside 6to4"),
    ("2002:a9fe:a9fe::1", "a link-local address inside 6to4"), ("2002::1", "an unspecified address inside 6to4"),
    ("2002:6440:1::1", "a non-global address inside 6to4"), ("2002:808:808::1", None),
    # deprecated site-local, Teredo tunnels, the local-use NAT64 prefix: never a public unicast address
    ("fec0::1", "a site-local address"), ("feff:ffff::1", "a site-local address"),
    ("2001:0:4136:e378:8000:63bf:3fff:fdd2", "a Teredo address"), ("2001::1", "a Teredo address"),
    ("64:ff9b:1::808:808", "a local-use NAT64 address"), ("64:ff9b:1:ffff::7f00:1", "a local-use NAT64 address"),
    # the well-known NAT64 prefix, IPv4-mapped and IPv4-compatible addresses: judged by the IPv4 address
    ("64:ff9b::7f00:1", "a loopback address inside IPv6"), ("64:ff9b::808:808", None),
    ("::ffff:a9fe:a9fe", "a link-local address inside IPv6"), ("::ffff:8.8.8.8", None),
    ("::127.0.0.1", "a loopback address inside IPv6"), ("::10.0.0.1", "a private address inside IPv6"),
    ("::8.8.8.8", "a deprecated IPv4-compatible address"), ("::1", "a loopback address"),
    ("::", "an unspecified address"), ("2001:4860:4860::8888", None),
])
def test_ipv6_ranges_that_carry_or_hide_other_addresses(address: str, kind: str | None) -> None:
    assert address_kind(address) == kind


def test_a_6to4_or_site_local_address_is_refused_in_a_url_and_when_resolved() -> None:
    problem = url_problem("https://[2002:7f00:1::1]:6379/x", ApiHosts())
    assert problem is not None and "2002:7f00:1::1 is a loopback address inside 6to4" in problem
    problem = address_problem("https://api.example.com/v1", ApiHosts(), ["2606:4700::1", "fec0::1"])
    assert problem is not None and "resolves to fec0::1, a site-local address" in problem


@pytest.mark.parametrize(("url", "fragment"), [
    ("file:///etc/passwd", "got file://"), ("gopher://127.0.0.1:6379/_x", "got gopher://"),
    ("ftp://h/x", "got ftp://"), ("localhost:8000/v1", "got localhost://"), ("//h/x", "got no scheme"),
    ("http://api.example.com/v1", "plain http:// to api.example.com is refused"),
    ("https://127.0.0.1:8663/v1", "127.0.0.1 is a loopback address"),
    ("https://[::ffff:7f00:1]/v1", "::ffff:7f00:1 is a loopback address inside IPv6"),
    ("https://169.254.169.254/latest", "169.254.169.254 is a link-local address"),
    ("https://u:p@api.example.com/v1", "user info"),
])
def test_urls_refused_without_a_listing(url: str, fragment: str) -> None:
    problem = url_problem(url, ApiHosts())
    assert problem is not None and fragment in problem


def test_a_key_goes_only_to_its_own_hosts() -> None:
    hosts = parse_api_hosts(f"{VARIABLE}=api.lab.example,COOPLAB_API_KEY_OTHER=127.0.0.1:8663,127.0.0.1:9000")
    assert url_problem("https://api.lab.example/v1", hosts, key_variable=VARIABLE) is None
    other = url_problem("http://127.0.0.1:8663/v1", hosts, key_variable=VARIABLE)
    assert other == (f"the key in {VARIABLE} is not sent to 127.0.0.1:8663: it is bound to api.lab.example. An "
                     f"operator who trusts 127.0.0.1:8663 with that key adds {VARIABLE}=127.0.0.1:8663 to the "
                     f"COOPLAB_API_HOSTS setting of the dashboard and the workers; or point the URL at a host bound "
                     f"to {VARIABLE}")
    unbound = url_problem("https://api.openai.com/v1", hosts, key_variable="COOPLAB_API_KEY_NONE")
    assert unbound is not None and "COOPLAB_API_HOSTS binds it to no host" in unbound
    # listed without a key: reachable over http and on loopback, but no key goes there
    assert url_problem("http://127.0.0.1:9000/v1", hosts) is None
    assert url_problem("http://127.0.0.1:9000/v1", hosts, key_variable=VARIABLE) is not None
    # a public https host needs no listing when no key goes there
    assert url_problem("https://api.example.com/v1", ApiHosts()) is None


def test_a_name_is_checked_by_every_address_it_resolves_to() -> None:
    url = "https://rebind.example/v1"
    assert address_problem(url, ApiHosts(), ["93.184.216.34"]) is None
    problem = address_problem(url, ApiHosts(), ["93.184.216.34", "127.0.0.1"])
    assert problem is not None and "rebind.example resolves to 127.0.0.1, a loopback address" in problem
    assert address_problem(url, parse_api_hosts("rebind.example"), ["127.0.0.1"]) is None  # listed: vouched for
    # a decimal spelling of 127.0.0.1 is a name to the URL parser; the resolver turns it into loopback
    with pytest.raises(OutboundRefused, match="2130706433 resolves to 127.0.0.1, a loopback address"):
        checked_target("https://2130706433/v1", ApiHosts())


def test_the_checked_address_is_the_one_connected_to(listener: Listener) -> None:
    """DNS rebinding: the name resolves to a public address when pre-flight checks it and to 127.0.0.1
    when the run connects. Each request resolves once, checks every address and connects to those."""
    calls: list[str] = []

    def rebinding(host: str, port: int) -> list[str]:
        calls.append(host)
        return ["93.184.216.34"] if len(calls) == 1 else ["127.0.0.1"]

    url = f"https://rebind.example:{listener.port}/v1"
    assert checked_target(url, ApiHosts(), resolver=rebinding).addresses == ("93.184.216.34",)
    client = ApiClient(ApiSettings(url=url, retries=0), hosts=ApiHosts(), resolver=rebinding)
    with pytest.raises(ComparatorApiError, match="rebind.example resolves to 127.0.0.1, a loopback address"):
        client.completions("p", 1)
    assert calls == ["rebind.example", "rebind.example"] and listener.connections == 0


# -- credentials in a run config --------------------------------------------------------------------------

@pytest.mark.parametrize(("trainer", "field", "fragment"), [
    ({"comparator_api_extra_body": {"api_key": "sk-1"}}, "comparator_api_extra_body", "'api_key' looks like"),
    ({"comparator_api_extra_body": {"metadata": [{"auth": {"x": 1}}]}}, "comparator_api_extra_body",
     "'metadata.0.auth' looks like"),
    ({"comparator_api_url": "https://u:p@api.example.com/v1"}, "comparator_api_url", "user info"),
    ({"comparator_api_url": "https://api.example.com/v1?key=sk-1"}, "comparator_api_url", "'key' looks like"),
    ({"comparator_api_url": "https://api.example.com/v1?a=1&access_token=t"}, "comparator_api_url",
     "'access_token' looks like"),
    ({"comparator_api_headers": {"X-Password": "hunter2"}}, "comparator_api_headers", "'X-Password' looks like"),
    ({"comparator_api_headers": {"X-Api-Key": "k"}}, "comparator_api_headers", "'X-Api-Key' looks like"),
    ({"comparator_api_headers": {"Cookie": "s=1"}}, "comparator_api_headers", "'Cookie' looks like"),
    ({"comparator_api_headers": {"X-Forward": "Bearer sk-1"}}, "comparator_api_headers", "'X-Forward' looks like"),
])
def test_credentials_are_refused_in_a_run_config(trainer: dict[str, Any], field: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=f"trainer.{field}: ") as info:
        parse_run_config(run_config("https://api.example.com/v1", **trainer))
    assert fragment in str(info.value) and "a run config is stored" in str(info.value)


def test_harmless_body_fields_pass() -> None:
    body = {"max_tokens": 9, "stop_token_ids": [2], "thinking": {"budget_tokens": 64}, "top_k": 5}
    parse_run_config(run_config("https://api.example.com/v1", comparator_api_extra_body=body))


# -- pre-flight ---------------------------------------------------------------------------------------------

def test_preflight_refuses_the_key_to_an_unlisted_listener(listener: Listener) -> None:
    problems = problems_of(run_config(listener.url))
    message = problems["trainer.comparator_api_url"]
    assert f"the key in {VARIABLE} is not sent to 127.0.0.1:{listener.port}" in message
    assert f"{VARIABLE}=127.0.0.1:{listener.port}" in message and "COOPLAB_API_HOSTS" in message
    assert listener.connections == 0


@pytest.mark.parametrize(("url", "fragment"), [
    ("file:///etc/passwd", "got file://"), ("gopher://127.0.0.1:6379/_POST", "got gopher://"),
    ("http://127.0.0.1:6379/", "127.0.0.1 is a loopback address"),
    ("https://10.0.0.7/v1", "10.0.0.7 is a private address"),
    ("https://localhost:8663/v1", "localhost resolves to"),
])
def test_preflight_refuses_schemes_and_private_addresses(url: str, fragment: str) -> None:
    config = run_config(url)
    del config["trainer"]["comparator_api_key_env"]  # no key: the URL alone is refused
    assert fragment in problems_of(config)["trainer.comparator_api_url"]


def test_preflight_accepts_a_listed_host_and_a_public_https_one(listener: Listener) -> None:
    hosts = parse_api_hosts(f"{VARIABLE}=127.0.0.1:{listener.port}")
    assert problems_of(run_config(listener.url), hosts) == {}
    keyless = run_config("https://93.184.216.34/v1")
    del keyless["trainer"]["comparator_api_key_env"]
    assert problems_of(keyless) == {}


# -- at run time, in the engine -----------------------------------------------------------------------------

def test_run_training_refuses_the_key_to_an_unlisted_listener(listener: Listener, tmp_path: Path) -> None:
    """The worker runs what is stored, pre-flight or not: the engine checks again before building anything."""
    from engine.build.run import run_training
    from engine.sinks import MemorySink

    with pytest.raises(ConfigError, match=f"trainer.comparator_api_url: the key in {VARIABLE} is not sent"):
        run_training(parse_run_config(run_config(listener.url)), output_dir=tmp_path, sink=MemorySink(),
                     permissions=OPERATOR)
    assert listener.connections == 0 and listener.authorizations() == []


def test_the_comparator_refuses_an_unlisted_host_before_any_request(listener: Listener, tmp_path: Path) -> None:
    from engine.build.run import build_trainer

    with pytest.raises(ValueError, match=f"comparator_api_url: the key in {VARIABLE} is not sent"):
        build_trainer(parse_run_config(run_config(listener.url)), output_dir=tmp_path, permissions=OPERATOR)
    assert listener.connections == 0


def test_a_keyless_request_to_loopback_is_refused_at_run_time(listener: Listener, tmp_path: Path) -> None:
    from engine.build.run import build_trainer

    config = run_config(listener.url)
    del config["trainer"]["comparator_api_key_env"]
    with pytest.raises(ValueError, match=f"comparator_api_url: 127.0.0.1 is a loopback address, reachable only when "
                                         f"the operator lists it in COOPLAB_API_HOSTS \\(e.g. "
                                         f"COOPLAB_API_HOSTS=127.0.0.1:{listener.port}\\)"):
        build_trainer(parse_run_config(config), output_dir=tmp_path, permissions=OPERATOR)
    assert listener.connections == 0
    listed = listing(f"127.0.0.1:{listener.port}")  # listed without a key: reachable, and no key is sent
    trainer = build_trainer(parse_run_config(config), output_dir=tmp_path, permissions=listed)
    assert trainer._api_client.completions("Count:", 1) == ["12"] and listener.authorizations() == []


def test_a_listed_host_receives_the_key(listener: Listener, tmp_path: Path) -> None:
    from engine.build.run import build_trainer

    trainer = build_trainer(parse_run_config(run_config(listener.url)), output_dir=tmp_path,
                            permissions=listing(f"{VARIABLE}=127.0.0.1:{listener.port}"))
    assert trainer._api_client.completions("Count:", 2) == ["12", "12"]
    assert listener.authorizations() == [f"Bearer {KEY}"]


def test_two_operators_in_one_process_enforce_their_own_listings(listener: Listener, tmp_path: Path) -> None:
    """The permissions travel with the trainer they were built for: no process-wide listing or key to leak."""
    from engine.build.run import build_trainer

    config = parse_run_config(run_config(listener.url))
    handed = OperatorPermissions(api_hosts=f"{VARIABLE}=127.0.0.1:{listener.port}",
                                 api_keys={VARIABLE: "sk-handed-over", "DATABASE_URL": "postgresql://secret"})
    first = build_trainer(config, output_dir=tmp_path / "a", permissions=handed)
    with pytest.raises(ValueError, match=f"the key in {VARIABLE} is not sent"):
        build_trainer(config, output_dir=tmp_path / "b", permissions=OPERATOR)  # built after: its own, empty
    assert first._api_client.completions("Count:", 1) == ["12"]  # the first still holds its listing and key
    assert listener.authorizations() == ["Bearer sk-handed-over"]  # the handed key, not the environment's
    assert "sk-handed-over" not in repr(handed) and handed.api_keys == {VARIABLE: "sk-handed-over"}


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_does_not_carry_the_key(status: int) -> None:
    """A listed host redirects to another listener: the client does not follow, the other one sees nothing
    (urllib followed a 302 with a GET that carried the Authorization header)."""
    other = Listener()
    first = Listener(redirect_to=other.url, redirect_status=status)
    try:
        hosts = parse_api_hosts(f"{VARIABLE}=127.0.0.1:{first.port},{VARIABLE}=127.0.0.1:{other.port}")
        client = ApiClient(ApiSettings(url=first.url, api_key=KEY, retries=0), hosts=hosts, key_variable=VARIABLE)
        with pytest.raises(ComparatorApiError, match=f"answered HTTP {status} \\(redirected\\)"):
            client.completions("p", 1)
        assert len(first.requests) == 1 and other.connections == 0
        unguarded = ApiClient(ApiSettings(url=first.url, api_key=KEY, retries=0))  # a library caller's client
        with pytest.raises(ComparatorApiError, match=f"answered HTTP {status} \\(redirected\\)"):
            unguarded.completions("p", 1)
        assert other.connections == 0
    finally:
        first.close()
        other.close()
