"""The rules that tie trainer settings together, written once for every config class.

Each rule reads only the settings it needs (a class without them skips it) and reports
``"field: message"``, naming the field to change. :func:`combination_problems` is the one place
they are checked: the run config's sections and the config classes each call it once.
"""

from __future__ import annotations

from typing import Any

from engine.schema.catalog import ALGORITHM_BASELINES, CATALOG, GROUP_BASELINE, LEARNED_REWARD

_MISSING = object()


def combination_problems(settings: Any) -> list[str]:
    """Problems of a combination of settings (pure function of the object's attributes)."""

    def get(name: str) -> Any:
        return getattr(settings, name, _MISSING)

    problems = []
    # the algorithm: a run config's trainer.algorithm, or a config class's algorithm_name (None: a base)
    algorithm = get("algorithm") if get("algorithm") is not _MISSING else get("algorithm_name")
    if algorithm not in (_MISSING, None) and get("num_generations") is not _MISSING:
        problem = group_size_problem(algorithm, get("num_generations"), get("rl_algorithm"))
        if problem:
            problems.append(f"num_generations: {problem}")
    epochs, clip = get("num_inner_epochs"), get("clip_epsilon")
    if epochs is not _MISSING and clip is not _MISSING and epochs > 1 and clip is None:
        problems.append("num_inner_epochs: > 1 reuses rollouts off-policy; set clip_epsilon (e.g. 0.2) as well")
    if get("parallel_training") == "mp" and not get("agent_devices"):
        problems.append("agent_devices: parallel_training='mp' needs agent_devices, e.g. ['cuda:0', 'cuda:1']")
    if get("turn_order") == "sequential" and get("joint_mode") == "cross":
        problems.append("turn_order: 'sequential' works with joint_mode='aligned' only")
    if get("lora_rank") is None:
        for name in ("lora_alpha", "lora_dropout", "lora_target_modules"):
            if get(name) not in (_MISSING, CATALOG[name].default):
                problems.append(f"{name}: has no effect without lora_rank; set lora_rank (e.g. 8) or leave {name} out")
    problems += _best_checkpoint_problems(get)
    if get("pair_selection") == "all" and get("preference_pairs_per_sample") not in (_MISSING, None):
        problems.append("preference_pairs_per_sample: pair_selection='all' keeps every pair with a positive reward "
                        "gap (CoMLRL's rule); leave preference_pairs_per_sample empty (null), or choose reward_gap "
                        "or random to keep a number of pairs per item")
    problems += _comparator_problems(get)
    problems += _credit_problems(get, algorithm)
    return problems


def _credit_problems(get: Any, algorithm: Any) -> list[str]:
    """The credit estimators' meaningless combinations (the team's size is :func:`team_problems`')."""
    estimator = get("credit_assignment")
    if estimator in (_MISSING, None, "group"):
        return []
    if estimator == "turn_group" and get("num_turns") == 1:
        return ["credit_assignment: 'turn_group' pools an agent's samples over the nodes of one turn; with "
                "num_turns 1 there is one node per item and it equals 'group'. Set num_turns >= 2 or use 'group'"]
    if estimator != "counterfactual":
        return []
    problems = []
    forced = get("forced_advantage_mode")
    mode = forced if forced not in (_MISSING, None) else get("advantage_mode")
    if mode in (_MISSING, None):
        mode = ALGORITHM_BASELINES.get(str(get("rl_algorithm") if algorithm in LEARNED_REWARD else algorithm), "mean")
    if mode == "raw":
        problems.append("credit_assignment: 'counterfactual' is a baseline (the agent's other samples, partners held "
                        "fixed) and advantage_mode 'raw' (mareinforce) has none; use magrpo, marloo or maremax")
    if get("turn_order") == "sequential":
        problems.append("credit_assignment: 'counterfactual' swaps an agent's sample while its partners' stay; with "
                        "turn_order 'sequential' a later agent's reply answers its predecessor's sample, so the "
                        "swapped dialogue never happened. Use turn_order 'simultaneous' or credit_assignment 'group'")
    if algorithm == "centralized_magrpo" or get("collaboration_mode") == "centralized":
        problems.append("credit_assignment: 'counterfactual' needs partners to hold fixed; a centralized team is one "
                        "model writing every role in one completion. Use 'group'")
    return problems


def team_problems(credit_assignment: str, num_agents: int) -> list[str]:
    """Problems of the trainer's ``credit_assignment`` with a team of ``num_agents`` models (read from a run
    config's ``TrainerSpec`` or from a MAGRPO-family config, which both declare it)."""
    if credit_assignment == "counterfactual" and num_agents < 2:
        return ["credit_assignment: 'counterfactual' replaces one agent's sample with its partners held fixed; "
                "a team of one agent has no partners. Use 'group' (GRPO)"]
    return []


def _best_checkpoint_problems(get: Any) -> list[str]:
    """The best checkpoint is chosen among evaluations: an ``eval/`` metric, and evaluations to choose from."""
    metric = get("best_checkpoint_metric")
    if metric in (_MISSING, None):
        return []
    if not str(metric).startswith("eval/"):
        return [f"best_checkpoint_metric: {metric!r} is not an evaluation metric; name one such as "
                "eval/reward_mean or eval/pass@1"]
    if get("eval_interval") == 0:
        return ["best_checkpoint_metric: needs evaluations during training; set eval_interval (e.g. 16)"]
    return []


def _comparator_problems(get: Any) -> list[str]:
    """A checkpoint comparator needs comparator_policy='model' (the policy that samples fixed weights);
    each replay setting belongs to its replay mode (CoMLRL's rules)."""
    problems = []
    policy = get("comparator_policy")
    if get("comparator_checkpoint") not in (_MISSING, None) and policy is not _MISSING and policy != "model":
        problems.append(f"comparator_checkpoint: a checkpoint is the comparator of comparator_policy='model' "
                        f"(this config has {policy!r}); set comparator_policy to 'model' or leave "
                        f"comparator_checkpoint empty")
    problems += _comparator_source_problems(get)
    mode = get("preference_replay_mode")
    if mode is _MISSING:
        return problems
    for name, owner in (("preference_replay_k", "nearest_k"), ("preference_replay_lambda", "lambda_decay")):
        value = get(name)
        if value is None and mode == owner:
            problems.append(f"{name}: preference_replay_mode='{owner}' needs it; set it")
        if value not in (_MISSING, None) and mode != owner:
            problems.append(f"{name}: only preference_replay_mode='{owner}' reads it (this config has {mode!r}); "
                            f"leave it empty")
    if get("preference_replay_sample_size") not in (_MISSING, None) and mode == "current":
        problems.append("preference_replay_sample_size: preference_replay_mode='current' trains on the iteration's "
                        "own pairs; choose nearest_k, all_history or lambda_decay, or leave it empty")
    return problems


def group_size_problem(algorithm: str, num_generations: int, rl_algorithm: Any = None) -> str | None:
    """The MAGRPO family's baseline compares siblings: it needs at least two samples per node, and so
    does a learned-reward run's RL stage of that family (``rl_algorithm``; iac/maac learn a critic)."""
    if num_generations >= 2:
        return None
    if algorithm in GROUP_BASELINE:
        return f"must be >= 2 for {algorithm} (the group baseline needs siblings)"
    if algorithm in LEARNED_REWARD and rl_algorithm in GROUP_BASELINE:
        return (f"must be >= 2 for rl_algorithm {rl_algorithm!r} (the group baseline needs siblings; "
                f"iac/maac learn a critic instead)")
    return None


API_DEFAULTS_IGNORED = ("comparator_api_format", "comparator_api_timeout", "comparator_api_retries",
                        "comparator_api_key_header",
                        "comparator_api_key_prefix", "comparator_api_response_field")


def _comparator_source_problems(get: Any) -> list[str]:
    """Each comparator setting belongs to the comparator that reads it (CoMLRL's rules, and the ones it
    leaves unchecked: a setting no comparator of this config reads is refused, not ignored)."""
    policy = get("comparator_policy")
    if policy is _MISSING:
        return []
    problems = []
    names = ("comparator_model_name", "comparator_agents")
    given = [n for n in names if get(n) not in (_MISSING, None)]
    if given and policy != "model":
        problems.append(f"{given[0]}: only comparator_policy='model' samples with another model (this config has "
                        f"{policy!r}); set comparator_policy to 'model' or leave {given[0]} empty")
    if len(given) == 2:
        problems.append("comparator_agents: give one of comparator_model_name (one model for every agent) and "
                        "comparator_agents (one per agent), not both")
    if given and get("comparator_checkpoint") not in (_MISSING, None):
        problems.append(f"comparator_checkpoint: the comparator is either a checkpoint or {given[0]}; leave one empty")
    if get("comparator_history_k") not in (_MISSING, None) and policy != "history":
        problems.append(f"comparator_history_k: only comparator_policy='history' reads it (this config has "
                        f"{policy!r}); leave it empty")
    centralized = get("comparator_generation_mode") == "centralized"
    if get("comparator_devices") not in (_MISSING, None) and policy in ("current", "api"):
        problems.append(f"comparator_devices: comparator_policy={policy!r} samples no comparator model (the current "
                        f"policy's own, or the API's); leave it empty")
    if get("comparator_num_candidates") not in (_MISSING, None) and policy == "current" and not centralized:
        problems.append("comparator_num_candidates: comparator_policy='current' pairs the current candidates with "
                        "each other (no comparator samples); choose another comparator_policy or leave it empty")
    index = get("comparator_centralized_agent_index")
    if index not in (_MISSING, 0) and not centralized:
        problems.append("comparator_centralized_agent_index: only comparator_generation_mode='centralized' reads it; "
                        "leave it at 0")
    agents = get("num_agents")
    if centralized and agents is not _MISSING and index is not _MISSING and index >= agents:
        problems.append(f"comparator_centralized_agent_index: {index} is not an agent of this team of {agents}; "
                        f"choose 0..{agents - 1}")
    problems += _api_problems(get, policy)
    return problems


def _api_problems(get: Any, policy: str) -> list[str]:
    if policy == "api":
        problems = []
        if get("comparator_api_url") in (_MISSING, None):
            problems.append("comparator_api_url: comparator_policy='api' needs the endpoint's URL; set it")
        if get("comparator_api_key") not in (_MISSING, None) and get("comparator_api_key_env") not in (_MISSING, None):
            problems.append("comparator_api_key_env: give the key (comparator_api_key) or the variable that holds it "
                            "(comparator_api_key_env), not both")
        return problems
    for name in ("comparator_api_url", "comparator_api_model", "comparator_api_max_n_per_request",
                 "comparator_api_headers", "comparator_api_key", "comparator_api_key_env", "comparator_api_extra_body",
                 *API_DEFAULTS_IGNORED):
        value = get(name)
        if value is not _MISSING and value != CATALOG[name].default:
            return [f"{name}: only comparator_policy='api' reads it (this config has {policy!r}); set "
                    f"comparator_policy to 'api' or leave {name} at its default"]
    return []
