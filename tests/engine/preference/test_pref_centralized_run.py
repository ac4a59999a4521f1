"""Centralized MADPO from a run config (``algorithm: madpo``, ``collaboration_mode: centralized``): one
joint agent built, trained and exported like ``centralized_magrpo``; its pairs' transcripts show the
roles; the task's protocol reaches the trainer; bad combinations are refused by field before a run
is queued."""

from __future__ import annotations

import pytest

from engine.build.run import build_trainer
from engine.build.run_folder import train_into_folder
from engine.examples import example_path
from engine.preference.centralized import EqualPartsCentralizedAdapter, TaggedCentralizedComparatorAdapter
from engine.preference.madpo import MADPOTrainer
from engine.schema.configure import trainer_config
from engine.schema.preference_configs import CentralizedMAGRPOConfig, MADPOConfig
from engine.schema.preflight import preflight_problems
from engine.schema.run_config import ConfigError, load_run_config, parse_run_config
from engine.sinks import MemorySink
from jobs.preflight import check_run_config

SHARED = {"share_weights_with": "first"}


def _team(algorithm: str, mode: str | None, second: dict | None = None, protocol: str = "halves",
          **trainer) -> dict:
    """A tiny two-role run config: ``second`` is the second agent's entry (default: sharing the first's weights)."""
    return {"name": "centralized-madpo", "agents": [{"name": "first", "model": "builtin:tiny-llama"},
                                                    {"name": "second", **(SHARED if second is None else second)}],
            "task": {"name": "quickstart", "params": {"num_items": 2, "eval_items": 1,
                                                      "centralized_protocol": protocol}},
            "trainer": {"algorithm": algorithm, "collaboration_mode": mode, **trainer}}


def _run(algorithm: str = "madpo", mode: str | None = "centralized", second: dict | None = None,
         protocol: str = "halves", **trainer) -> dict:
    """:func:`_team` with small MADPO settings (few candidates, short completions, no evaluation after step 0)."""
    return _team(algorithm, mode, second, protocol, **{
        "num_train_epochs": 1, "preference_num_candidates": 4, "preference_pairs_per_sample": 2, "max_new_tokens": 8,
        "train_batch_size": 2, "eval_interval": 100, "eval_num_samples": 1, "checkpoint_interval": 100,
        "transcripts_per_step": 1, **trainer})


def _train(config, folder):
    """Train ``config`` into ``folder`` through the job's path; returns the built trainer, the result, the sink."""
    built = []

    def build(cfg, **kwargs):
        built.append(build_trainer(cfg, **kwargs))
        return built[-1]

    sink = MemorySink()
    result = train_into_folder(config, build, output_dir=folder, sink=sink)
    [trainer] = built
    return trainer, result, sink


def test_run_config_trains_and_exports_one_joint_model_whose_pairs_show_the_roles(tmp_path) -> None:
    trainer, result, sink = _train(parse_run_config(_run()), tmp_path)
    assert result.status == "completed" and type(trainer) is MADPOTrainer
    assert trainer.num_agents == 1 and trainer.agent_names == ["joint"] and trainer.role_names == ["first", "second"]
    assert isinstance(trainer.collaboration.adapter, EqualPartsCentralizedAdapter)  # the task's protocol
    assert trainer.pairs and all(len(p.winner_completions) == len(p.loser_completions) == 1 for p in trainer.pairs)
    pair = trainer.pairs[0]
    item = dict(trainer.train_dataset[pair.item_index])
    text = pair.winner_completions[0]
    half = round(len(text) / 2)
    assert trainer.collaboration.split(text, item) == [text[:half].strip(), text[half:].strip()]  # the roles' halves
    assert sink.steps[0].metrics["centralized/unparsed_share"] == 0.0 and "agent/joint/loss" in sink.steps[0].metrics
    episode = sink.steps[0].episodes[0]
    joint, first, second = episode.turns
    assert [t.agent_name for t in episode.turns] == ["joint", "first", "second"]
    assert [t.agent_index for t in episode.turns] == [0, 1, 2]
    assert "Agent 1 original prompt" in joint.prompt and first.prompt.endswith("Write letters from a to m:\n")
    split = trainer.collaboration.split(joint.completion, dict(trainer.train_dataset[episode.item_index]))
    assert [first.completion, second.completion] == split
    assert {t.reward for t in episode.turns} == {joint.reward}
    assert (tmp_path / "model" / "agent_0" / "config.json").is_file()
    assert not (tmp_path / "model" / "agent_1").exists()  # one model for every role


def test_the_tags_protocol_reaches_the_trainer_and_says_why_a_random_model_finds_no_pair() -> None:
    config = parse_run_config(_run(protocol="tags", preference_num_candidates=2, max_new_tokens=4))
    trainer = build_trainer(config, output_dir=None)
    assert isinstance(trainer.collaboration.adapter, TaggedCentralizedComparatorAdapter)
    with pytest.raises(ValueError, match="100% of the joint completions had no tagged section.*centralized_protocol"):
        trainer.collect_pairs()


def test_the_collaboration_mode_maps_onto_each_config_class() -> None:
    example = load_run_config(example_path("centralized_madpo"))
    cfg = trainer_config(example.trainer, example.agents)
    assert isinstance(cfg, MADPOConfig) and cfg.collaboration_mode == "centralized" and cfg.num_agents == 2
    assert example.task.params["centralized_protocol"] == "halves"
    empty = parse_run_config(_run(mode=None))  # empty: the algorithm's own
    assert trainer_config(empty.trainer, empty.agents).collaboration_mode == "decentralized"
    base = parse_run_config(_team("centralized_magrpo", None))
    assert isinstance(cfg := trainer_config(base.trainer, base.agents), CentralizedMAGRPOConfig)
    assert cfg.collaboration_mode == "centralized"
    separate = parse_run_config(_team("magrpo", "decentralized", second={"model": "builtin:tiny-llama"}))
    assert trainer_config(separate.trainer, separate.agents).num_agents == 2  # 'decentralized' is no unused setting


@pytest.mark.parametrize("algorithm", ["magrpo", "iac", "maac", "grpo"])
def test_centralized_is_refused_by_field_for_algorithms_without_it(algorithm: str) -> None:
    with pytest.raises(ConfigError, match=f"^trainer.collaboration_mode: 'centralized' .* is supported by madpo, "
                                          f"madpo_iter, marlhf, marlhf_iter and centralized_magrpo, not by "
                                          f"{algorithm}.*set trainer.algorithm to one of those, or leave "
                                          f"collaboration_mode empty"):
        parse_run_config(_team(algorithm, "centralized"))


SMALL_RL = {"num_generations": 2, "rollout_buffer_size": 2, "reward_num_train_epochs": 1, "max_steps": 2}


@pytest.mark.parametrize(("algorithm", "settings"), [
    ("madpo_iter", {"num_iterations": 2, "comparator_policy": "history", "max_steps": 2}),
    ("marlhf", SMALL_RL),
    ("marlhf_iter", {**SMALL_RL, "num_iterations": 2, "comparator_policy": "current_copy", "num_train_epochs": 1}),
])
def test_every_preference_trainer_trains_one_joint_model_from_a_run_config(tmp_path, algorithm, settings) -> None:
    """The iterative trainers and MARLHF with collaboration_mode centralized: one joint agent whose pairs, reward
    model and RL steps see joint completions, the task's protocol splitting them for the task's reward."""
    trainer, result, sink = _train(parse_run_config(_run(algorithm, **settings)), tmp_path)
    assert result.status == "completed" and result.step == 2
    assert trainer.num_agents == 1 and trainer.agent_names == ["joint"] and trainer.role_names == ["first", "second"]
    assert isinstance(trainer.collaboration.adapter, EqualPartsCentralizedAdapter)
    pair = trainer.collector.pairs[0]
    assert len(pair.winner_completions) == 1  # a joint answer
    item = dict(trainer.train_dataset[pair.item_index])
    roles = trainer.collaboration.split(pair.winner_completions[0], item)
    task_reward = trainer.collaboration.role_reward.score([[r] for r in roles], [item], [[""], [""]])[0][0]
    assert pair.winner_reward == pytest.approx(task_reward)  # labelled by the task's reward on the split roles
    assert sink.steps[0].metrics["centralized/unparsed_share"] == 0.0
    assert (tmp_path / "model" / "agent_0" / "config.json").is_file() and not (tmp_path / "model" / "agent_1").exists()


def test_a_centralized_team_has_no_centralized_comparator() -> None:
    from engine.schema.preference_configs import MADPOIterConfig

    with pytest.raises(ValueError, match="comparator_generation_mode: with collaboration_mode='centralized' the team"):
        MADPOIterConfig(collaboration_mode="centralized", comparator_generation_mode="centralized")


def test_centralized_magrpo_refuses_a_decentralized_mode() -> None:
    with pytest.raises(ConfigError, match="^trainer.collaboration_mode: centralized_magrpo always trains one model "
                                          "for every role.*set trainer.algorithm to magrpo"):
        parse_run_config(_team("centralized_magrpo", "decentralized"))


@pytest.mark.parametrize(("second", "field", "message"), [
    ({"model": "builtin:tiny-llama"}, "agents.1.share_weights_with",
     "madpo with collaboration_mode='centralized' trains one model for every role; set it to 'first' (or set "
     "trainer.collaboration_mode to 'decentralized')"),
    ({**SHARED, "temperature": 0.5}, "agents.1.temperature",
     "madpo with collaboration_mode='centralized' samples and trains every role with the first agent's settings; "
     "leave it empty here and set it on agents.0 ('first')"),
    ({**SHARED, "system_prompt": "Be brief."}, "agents.1.system_prompt", "leave it empty here"),
])
def test_a_team_that_is_not_one_models_roles_is_refused_before_queuing(second, field, message) -> None:
    config = parse_run_config(_run(second=second))
    [problem] = preflight_problems(config)
    assert problem.field == field and message in problem.message
    with pytest.raises(ConfigError, match=f"^{field}: "):
        check_run_config(_run(second=second))  # what cooplab train/submit and the job client call


def test_lora_is_refused_for_one_joint_model() -> None:
    data = _run(second={**SHARED, "lora_rank": 4})
    data["agents"][0]["lora_rank"] = 4  # sharing agents must all use LoRA: each would get its own adapter
    [problem] = preflight_problems(parse_run_config(data))
    assert problem.field == "agents.0.lora_rank" and "remove lora_rank from the agents" in problem.message


def test_equal_parts_protocol_by_hand() -> None:
    parts = EqualPartsCentralizedAdapter()
    assert parts.parse_completion("abcdef", {}, 2) == ["abc", "def"]
    assert parts.parse_completion("abcdefg", {}, 3) == ["ab", "cde", "fg"]
    assert parts.parse_completion("", {}, 2) == ["", ""]  # never unparsed: every role gets its part
    prompt = parts.build_prompt({}, ["Plan it.", "Do it."])
    assert "Agent 1 original prompt:\nDo it." in prompt and "cut into 2 equal parts" in prompt


def test_preflight_counts_one_joint_model_for_a_centralized_run() -> None:
    from engine.schema.preflight import trained_agents

    run = parse_run_config(_run("madpo_iter", comparator_policy="model",
                                comparator_agents=["builtin:tiny-llama", "builtin:tiny-llama"]))
    assert trained_agents(run) == 1 and trained_agents(parse_run_config(_run(mode="decentralized",
                                                                              second={"model": "builtin:tiny-llama"}))) == 2
    problems = [(p.field, p.message) for p in preflight_problems(run)]
    assert ("trainer.comparator_agents", "got 2 entries for one joint model (collaboration_mode centralized); give "
                                         "one for all or one per trained agent") in problems
