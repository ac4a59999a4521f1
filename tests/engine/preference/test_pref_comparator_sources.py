"""The comparators that write text (an HTTP API, another model, a centralized writer), the comparator's
own candidate count, the iteration files (policies, pairs, reward distributions) and MARLHFIter's
learned pair labels, on tiny real models and a real local HTTP server."""

from __future__ import annotations

import json
from xml.etree import ElementTree

import pytest
import torch
from safetensors.torch import load_file

from engine import MADPOIterConfig, MADPOIterTrainer, MARLHFIterConfig, MARLHFIterTrainer
from engine.preference.comparators import encode_answer
from engine.schema.run_config import ConfigError, parse_run_config
from engine.sinks import MemorySink
from tests.engine.preference.api_server import ApiServer
from tests.engine.preference.pref_helpers import PROMPTS, digit_share, tiny_team, weights


@pytest.fixture
def api_server():
    servers = []

    def start(answer):
        servers.append(ApiServer(answer))
        return servers[-1]

    yield start
    for server in servers:
        server.close()


def _config(cls=MADPOIterConfig, **overrides):
    values = dict(num_iterations=1, preference_num_candidates=3, preference_pairs_per_sample=3, max_new_tokens=6,
                  train_batch_size=4, items_per_step=4, eval_interval=0, logging_steps=1, agent_learning_rate=1e-3,
                  checkpoint_interval=0, seed=0)
    values.update(overrides)
    return cls(**values)


def _trainer(config, cls=MADPOIterTrainer, **kwargs):
    models, tokenizers = tiny_team()
    return cls(agents=models, tokenizer=tokenizers, train_dataset=PROMPTS, reward_func=digit_share, args=config,
               **kwargs)


def test_an_api_comparator_answers_every_agent_and_its_answers_are_the_pairs_other_side(api_server, monkeypatch):
    served = {0: ["123", "4", "56 7"], 1: ["89", "0000", "x1"]}  # per agent: digit-rich answers beat random text
    server = api_server(lambda body: {"completions": served[body["agent_idx"]]})
    monkeypatch.setenv("COOPLAB_TEST_COMPARATOR_KEY", "sk-test-123")
    sink = MemorySink()
    trainer = _trainer(_config(comparator_policy="api", comparator_api_url=server.url,
                               comparator_api_key_env="COOPLAB_TEST_COMPARATOR_KEY", comparator_api_model="m1"),
                       sink=sink)
    trainer.train()
    assert len(server.requests) == len(PROMPTS) * 2  # one request per item and agent, all 3 answers at once
    headers, body = server.requests[0]
    assert headers["Authorization"] == "Bearer sk-test-123"
    assert (body["num_return_sequences"], body["model"], body["max_new_tokens"]) == (3, "m1", 6)
    assert body["prompt"] in {p["prompt"] for p in PROMPTS}  # the agent's formatter prompt, as CoMLRL sends it
    api_sides = [side for p in trainer.collector.pairs for side in ("winner", "loser")
                 if getattr(p, f"{side}_completions") in ([a, b] for a, b in zip(served[0], served[1], strict=True))]
    assert api_sides, "no pair has the API's joint answer on one side"
    pair = next(p for p in trainer.collector.pairs if p.winner_completions[0] in served[0])
    agent = trainer.agents[0]
    assert pair.winner_ids[0] == encode_answer(agent, pair.winner_completions[0])
    assert pair.winner_ids[0][-1] == agent.tokenizer.eos_token_id  # the API ended its answer
    assert pair.winner_reward == pytest.approx(digit_share([pair.winner_completions[0]], [pair.winner_completions[1]])[0])
    first = sink.steps[0].metrics
    assert first["comparator/api_requests"] == 8.0
    assert "sk-test-123" not in repr(trainer._api_client.settings)


def test_a_centralized_api_comparator_writes_every_role_in_one_answer(api_server):
    server = api_server(lambda body: {"completions": ["<agent_0>12</agent_0> <agent_1>34</agent_1>", "no tags"]})
    sink = MemorySink()
    trainer = _trainer(_config(comparator_policy="api", comparator_api_url=server.url, comparator_num_candidates=2,
                               comparator_generation_mode="centralized", comparator_centralized_agent_index=1),
                       sink=sink)
    trainer.train()
    assert len(server.requests) == len(PROMPTS)  # one joint request per item
    body = server.requests[0][1]
    assert body["agent_idx"] == 1 and "<agent_0>" in body["prompt"] and "<agent_1>" in body["prompt"]
    joint = [p.winner_completions for p in trainer.collector.pairs] + [p.loser_completions for p in trainer.collector.pairs]
    assert ["12", "34"] in joint  # split back into the roles
    assert sink.steps[0].metrics["comparator/unparsed_share"] == pytest.approx(0.5)
    assert len(trainer.collector.rewards["comparator"]) == len(PROMPTS) * 2  # comparator_num_candidates


def test_a_missing_key_variable_is_refused_before_any_sampling(monkeypatch):
    monkeypatch.delenv("COOPLAB_TEST_NO_SUCH_KEY", raising=False)
    with pytest.raises(ValueError, match="comparator_api_key_env: the variable 'COOPLAB_TEST_NO_SUCH_KEY' is not set"):
        _trainer(_config(comparator_policy="api", comparator_api_url="http://127.0.0.1:9/x",
                         comparator_api_key_env="COOPLAB_TEST_NO_SUCH_KEY"))


def test_a_run_stopped_between_iterations_resumes_the_other_models_draws(tmp_path):
    """The comparator model's generator rides in the checkpoint: the next iteration's comparator samples
    continue where the uninterrupted run's would."""
    config = dict(num_iterations=2, comparator_policy="model", comparator_model_name="builtin:tiny-gpt2-xs")
    full = _trainer(_config(**config), sink=MemorySink(), output_dir=tmp_path / "full")
    full.train()
    stop = full.steps_per_iteration  # the first iteration done, the second not begun
    part = _trainer(_config(**config), sink=MemorySink(stop_after_steps=stop), output_dir=tmp_path / "part")
    assert part.train().status == "stopped"
    resumed = _trainer(_config(**config), sink=MemorySink())
    resumed.train(resume_from_checkpoint=tmp_path / "part" / "checkpoints" / f"checkpoint-{stop}")
    assert [p.to_state() for p in resumed.collector.pairs] == [p.to_state() for p in full.collector.pairs]
    for a, b in zip(weights(full), weights(resumed), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_another_model_compares_and_a_run_stopped_mid_iteration_resumes_exactly(tmp_path):
    config = dict(num_iterations=2, comparator_policy="model", comparator_model_name="builtin:tiny-gpt2-xs",
                  comparator_num_candidates=2)
    sink = MemorySink()
    trainer = _trainer(_config(**config), sink=sink, output_dir=tmp_path / "full")
    samplers = trainer.external_comparator.samplers
    assert len(samplers) == 2 and len({id(a.model) for a in samplers}) == 1  # one model for all, loaded once
    assert samplers[0].model is not trainer.agents[0].model and samplers[0].optimizer is None
    frozen = samplers[0].model
    before = {k: v.clone() for k, v in frozen.state_dict().items()}
    trainer.train()
    steps = trainer.total_steps
    assert steps >= 4 and len(trainer.collector.rewards["comparator"]) == len(PROMPTS) * 2
    assert all(torch.equal(before[k], v) for k, v in frozen.state_dict().items())  # frozen comparator

    stop = trainer.steps_per_iteration + 1  # inside the second iteration
    part = _trainer(_config(**config), sink=MemorySink(stop_after_steps=stop), output_dir=tmp_path / "part")
    assert part.train().status == "stopped"
    resumed = _trainer(_config(**config), sink=MemorySink())
    resumed.train(resume_from_checkpoint=tmp_path / "part" / "checkpoints" / f"checkpoint-{stop}")
    for a, b in zip(weights(trainer), weights(resumed), strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)


def test_a_centralized_snapshot_comparator_samples_the_writers_past_policy() -> None:
    sink = MemorySink()
    trainer = _trainer(_config(num_iterations=2, comparator_policy="history", comparator_generation_mode="centralized",
                               comparator_num_candidates=2), sink=sink)
    trainer.train()
    (writer,) = trainer.collector.comparator_tree.samplers  # one model writes every role
    assert writer.model is trainer._comparator_copies[0] and writer.optimizer is None
    share = [s.metrics["comparator/unparsed_share"] for s in sink.steps if "comparator/unparsed_share" in s.metrics]
    assert len(share) == 2 and all(0.0 <= v <= 1.0 for v in share)  # random tiny models rarely write tags


def test_iteration_files_hold_the_policies_the_pairs_and_the_reward_distributions(tmp_path) -> None:
    sink = MemorySink()
    trainer = _trainer(_config(num_iterations=2, comparator_policy="history", policy_checkpoint_dir="policies",
                               preference_replay_dir=str(tmp_path / "replay"), log_reward_distribution=True),
                       sink=sink, output_dir=tmp_path / "run")
    initial = weights(trainer)
    trainer.train()
    first = load_file(str(tmp_path / "run" / "policies" / "iteration_001" / "model_0.safetensors"))
    assert all(torch.equal(first[k], initial[0][k]) for k in first)  # the policy the first iteration started from
    second = load_file(str(tmp_path / "run" / "policies" / "iteration_002" / "model_0.safetensors"))
    assert any(not torch.equal(second[k], initial[0][k]) for k in second)  # trained in the first iteration
    meta = json.loads((tmp_path / "run" / "policies" / "iteration_002" / "meta.json").read_text())
    assert meta == {"iteration": 2, "model_of_agent": [0, 1]}
    lines = (tmp_path / "replay" / "iteration_002.jsonl").read_text().splitlines()
    assert [json.loads(line)["winner_reward"] for line in lines] == [p.winner_reward for p in trainer.collector.pairs]
    record = json.loads((tmp_path / "run" / "reward_distribution" / "iteration_002.json").read_text())
    assert record["series"]["current"]["count"] == len(PROMPTS) * 3
    ElementTree.fromstring((tmp_path / "run" / "reward_distribution" / "iteration_002.svg").read_text())
    firsts = [s.metrics for s in sink.steps if "pairs/total" in s.metrics]
    assert len(firsts) == 2
    assert firsts[1]["iter/reward_dist/current/count"] == len(PROMPTS) * 3
    assert firsts[1]["iter/reward_dist/winner/count"] == len(trainer.collector.pairs)
    mean = sum(trainer.collector.rewards["comparator"]) / len(trainer.collector.rewards["comparator"])
    assert firsts[1]["iter/reward_dist/comparator/mean"] == pytest.approx(mean)


def test_marlhf_iter_labels_later_pairs_with_the_learned_reward() -> None:
    config = _config(MARLHFIterConfig, num_iterations=2, comparator_policy="history", num_generations=2,
                     num_train_epochs=1, rollout_buffer_size=4, preference_scoring_reward="reward_model")
    trainer = _trainer(config, MARLHFIterTrainer)
    assert trainer._scoring_reward(0) is trainer.task_reward
    seen = []  # (iteration, a pair's label, its task reward, the reward model's score) before each refit
    fit = trainer.fit_reward_model

    def observed_fit(pairs=None):
        pair = trainer.collector.pairs[0]
        args = ([[c] for c in pair.winner_completions], [PROMPTS[pair.item_index]], [[q] for q in pair.prompts])
        seen.append((trainer.iteration, pair.winner_reward, trainer.task_reward.score(*args)[0][0],
                     trainer.tree.reward.score(*args)[0][0]))
        return fit(pairs)

    trainer.fit_reward_model = observed_fit
    trainer.train()
    (first, label1, task1, _), (second, label2, task2, learned2) = seen
    assert (first, second) == (0, 1)
    assert label1 == pytest.approx(task1)  # the first iteration: the task's reward
    assert label2 == pytest.approx(learned2, abs=1e-5) and label2 != pytest.approx(task2)  # then the learned one


@pytest.mark.parametrize(("settings", "message"), [
    ({"comparator_model_name": "builtin:tiny-llama-xs"}, "comparator_model_name: only comparator_policy='model'"),
    ({"comparator_policy": "model", "comparator_model_name": "a", "comparator_agents": ["a", "b"]},
     "comparator_agents: give one of"),
    ({"comparator_policy": "api"}, "comparator_api_url: comparator_policy='api' needs"),
    ({"comparator_api_url": "http://x"}, "comparator_api_url: only comparator_policy='api' reads it"),
    ({"comparator_num_candidates": 4}, "comparator_num_candidates: comparator_policy='current' pairs"),
    ({"comparator_centralized_agent_index": 1}, "comparator_centralized_agent_index: only comparator_generation_mode"),
    ({"comparator_generation_mode": "centralized", "comparator_centralized_agent_index": 2},
     "comparator_centralized_agent_index: 2 is not an agent of this team of 2"),
    ({"comparator_policy": "api", "comparator_api_url": "http://x", "comparator_api_key": "k",
      "comparator_api_key_env": "K"}, "comparator_api_key_env: give the key"),
    ({"comparator_policy": "current_copy", "comparator_history_k": 2}, "comparator_history_k: only"),
])
def test_a_comparator_setting_no_comparator_reads_is_refused(settings, message) -> None:
    with pytest.raises(ValueError, match=message):
        MADPOIterConfig(num_agents=2, **settings)


def test_comlrl_spellings_are_read() -> None:
    config = MADPOIterConfig(comparator_policy="HTTP", comparator_api_url="https://api.example/v1",
                             comparator_api_format="deepseek", comparator_generation_mode="single_agent")
    assert (config.comparator_policy, config.comparator_api_format, config.comparator_generation_mode) == (
        "api", "openai_chat", "centralized")
    assert MARLHFIterConfig(preference_scoring_reward="learned").preference_scoring_reward == "reward_model"


def test_a_run_config_names_the_key_variable_and_never_holds_the_key() -> None:
    base = {"agents": [{"name": "a", "model": "builtin:tiny-llama-xs"}, {"name": "b", "model": "builtin:tiny-qwen2-xs"}],
            "task": {"name": "quickstart"}}
    trainer = {"algorithm": "madpo_iter", "comparator_policy": "api", "comparator_api_url": "https://api.example/v1",
               "comparator_api_key_env": "COOPLAB_API_KEY_LAB", "comparator_api_headers": {"X-Team": "lab"}}
    run = parse_run_config({**base, "trainer": trainer})
    assert (run.trainer.comparator_api_key_env, run.trainer.comparator_api_headers) == (
        "COOPLAB_API_KEY_LAB", {"X-Team": "lab"})
    with pytest.raises(ConfigError, match="comparator_api_key"):
        parse_run_config({**base, "trainer": {**trainer, "comparator_api_key": "sk-secret"}})
    # no credential header is stored, and no other variable of the workers can be sent to a URL
    with pytest.raises(ConfigError, match="trainer.comparator_api_headers: 'Authorization' looks like a credential"):
        parse_run_config({**base, "trainer": {**trainer, "comparator_api_headers": {"Authorization": "Bearer sk"}}})
    with pytest.raises(ConfigError, match="trainer.comparator_api_key_env: 'DATABASE_URL' is not a COOPLAB_API_KEY_"):
        parse_run_config({**base, "trainer": {**trainer, "comparator_api_key_env": "DATABASE_URL"}})


def test_a_library_key_and_credential_headers_never_reach_the_checkpoint(api_server, tmp_path) -> None:
    server = api_server(lambda body: {"completions": ["1", "22", "333"]})
    config = _config(comparator_policy="api", comparator_api_url=server.url, comparator_api_key="sk-LIB-123",
                     comparator_api_headers={"X-Api-Key": "sk-HDR-456", "X-Team": "lab"}, checkpoint_interval=1)
    masked = config.to_dict()
    assert masked["comparator_api_key"] == "***" and masked["comparator_api_headers"] == {"X-Api-Key": "***",
                                                                                        "X-Team": "lab"}
    trainer = _trainer(config, output_dir=tmp_path)
    trainer.train()
    assert server.requests[0][0]["Authorization"] == "Bearer sk-LIB-123"  # the request itself carries the key
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not [p for p in written if b"sk-LIB-123" in p.read_bytes() or b"sk-HDR-456" in p.read_bytes()]


def test_preflight_names_a_missing_comparator_model_and_a_wrong_list_length(tmp_path) -> None:
    from engine.schema.preflight import preflight_problems

    base = {"agents": [{"name": "a", "model": "builtin:tiny-llama-xs"}, {"name": "b", "model": "builtin:tiny-qwen2-xs"}],
            "task": {"name": "quickstart"}}
    trainer = {"algorithm": "madpo_iter", "comparator_policy": "model",
               "comparator_agents": ["builtin:tiny-gpt2-xs", str(tmp_path / "gone"), "builtin:tiny-llama-xs"]}
    problems = preflight_problems(parse_run_config({**base, "trainer": trainer}))
    fields = [p.field for p in problems]
    assert "trainer.comparator_agents" in fields  # 3 entries for 2 agents
    assert "trainer.comparator_agents.1" in fields and "trainer.comparator_agents.0" not in fields
    fine = {**trainer, "comparator_agents": None, "comparator_model_name": "builtin:tiny-gpt2-xs"}
    assert preflight_problems(parse_run_config({**base, "trainer": fine})) == []


def test_a_cut_answer_is_not_closed_with_eos() -> None:
    from engine.preference.comparators import Answer

    trainer = _trainer(_config())
    agent = trainer.agents[0]
    eos = agent.tokenizer.eos_token_id
    assert encode_answer(agent, "12")[-1] == eos
    assert encode_answer(agent, "12", ended=False)[-1] != eos
    assert Answer("x").ended and not Answer("x", ended=False).ended


def test_adapters_and_devices_nothing_reads_are_refused() -> None:
    from engine.preference.centralized import EqualPartsCentralizedAdapter

    with pytest.raises(ValueError, match="centralized_adapter: only collaboration_mode='centralized' reads it"):
        _trainer(_config(comparator_policy="history"), centralized_adapter=EqualPartsCentralizedAdapter())
    with pytest.raises(ValueError, match="centralized_comparator_adapter: only comparator_generation_mode"):
        _trainer(_config(comparator_policy="history"), centralized_comparator_adapter=EqualPartsCentralizedAdapter())
    trainer = _trainer(_config(comparator_policy="history", comparator_generation_mode="centralized"),
                       centralized_comparator_adapter=EqualPartsCentralizedAdapter())
    assert isinstance(trainer._collaboration.adapter, EqualPartsCentralizedAdapter)  # CoMLRL's argument name
    for policy in ("current", "api"):
        with pytest.raises(ValueError, match=f"comparator_devices: comparator_policy='{policy}' samples no"):
            MADPOIterConfig(comparator_policy=policy, comparator_api_url="http://x/y" if policy == "api" else None,
                            comparator_devices=["cpu"])


def test_a_fresh_run_replaces_an_older_runs_policy_files(tmp_path) -> None:
    policies = str(tmp_path / "policies")
    for seed in (1, 2):
        trainer = _trainer(_config(num_iterations=2, comparator_policy="history", policy_checkpoint_dir=policies,
                                   seed=seed))
        trainer.train()
    second = load_file(str(tmp_path / "policies" / "iteration_002" / "model_0.safetensors"))
    assert all(torch.equal(second[k], trainer.snapshots[1][0][k]) for k in second)  # the last run's
