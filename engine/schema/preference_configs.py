"""``MADPOConfig`` and ``CentralizedMAGRPOConfig``: CoMLRL 1.4.3's field names and defaults, plus
CoopLab's extras.

The settings come from :mod:`engine.schema.catalog`. CoMLRL's ``MADPOConfig`` extends its
``MAGRPOConfig``, so a CoMLRL script may pass any MAGRPO field; every one is accepted here. The
MAGRPO-only ones MADPO never reads (``num_generations``, ``discount``, advantage and reference-KL
settings, ``rollout_buffer_size`` except as the default batch size) are listed in
``compat_only``: they are accepted for ports, and the run config refuses them for ``madpo``.

Departures from CoMLRL, each deliberate (see docs/preference.md):

* ``reference_free=False`` anchors the margin on the frozen initial policy (standard DPO);
  CoMLRL has only the reference-free form (the default here too).
* ``joint_mode="cross"`` pairs joint candidates of the K^N product (CoMLRL refuses it).
* ``seed`` seeds the pair order and random pair selection (CoMLRL shuffles with the global RNG).
"""

from __future__ import annotations

from engine.schema.catalog import ACTOR_CRITIC, ALGORITHM_BASELINES, CATALOG
from engine.schema.configs import COMLRL_SETTINGS as MAGRPO_COMLRL_SETTINGS
from engine.schema.configs import MAGRPOConfig
from engine.schema.derive import ConfigModel, config_class

PREFERENCE_SETTINGS = (
    "collaboration_mode", "preference_num_candidates", "preference_pairs_per_sample", "pair_selection", "dpo_beta",
    "use_environment_step", "environment_steps_per_pair",
)
EXTRA_SETTINGS = (
    "reference_free", "loss_type", "max_grad_norm", "weight_decay", "lr_scheduler", "warmup_steps",
    "gradient_checkpointing", "seed", "turn_order", "items_per_step", "fast_decode", "rollout_dtype", "micro_batch_size",
    "max_steps", "eval_greedy", "eval_samples_per_item", "checkpoint_interval", "checkpoint_total_limit",
    "best_checkpoint_metric", "best_checkpoint_mode",
    "transcripts_per_step", "model_config", "agent_names",
)
MADPO_DEFAULTS = {"num_turns": 1, "early_termination_threshold": None}
# the DPO trainers' own defaults: CoMLRL clips no gradient (measured: clipping at 1.0 cost about a fifth of
# the learning on the issue-25 workload, docs/preference.md); MARLHF's RL stage keeps the MAGRPO defaults
DPO_DEFAULTS = {**MADPO_DEFAULTS, "max_grad_norm": None}


def _pair_problems(config: ConfigModel, trainer: str, iterative_config: str, what: str) -> None:
    """The rules every preference config shares: single-turn, comparator pairs only when iterative,
    and a centralized team's comparator writes joint answers already."""
    if (config.iterative and config.collaboration_mode == "centralized"
            and config.comparator_generation_mode == "centralized"):
        raise ValueError("comparator_generation_mode: with collaboration_mode='centralized' the team is one model "
                         "writing every role, and so is its comparator; leave it 'decentralized'")
    if config.num_turns != 1:
        raise ValueError(f"num_turns: {trainer} is single-turn ({what}); set 1")
    if config.train_batch_size is None:  # CoMLRL resolves it when the config is made: MADPOConfig().train_batch_size == 2
        object.__setattr__(config, "train_batch_size", config.rollout_buffer_size)
    if config.pair_selection == "comparator_reward" and not config.iterative:
        raise ValueError(f"pair_selection: 'comparator_reward' compares with a comparator policy ({iterative_config}); "
                         f"use reward_gap, all or random")


class _Preference(ConfigModel):
    group_baseline = False  # pairs compare candidates; num_generations is not read
    iterative: bool = False

    def __post_init__(self) -> None:
        _pair_problems(self, "MADPOIter" if self.iterative else "MADPO", "MADPOIterConfig",
                       "pairs compare whole joint answers")
        super().__post_init__()


MADPOConfig = config_class(
    "MADPOConfig", MAGRPO_COMLRL_SETTINGS + PREFERENCE_SETTINGS + EXTRA_SETTINGS, module=__name__,
    defaults=DPO_DEFAULTS, bases=(_Preference,), algorithm_name="madpo",
    compat_only=("num_generations", "discount", "early_termination_threshold", "advantage_normalization",
                 "advantage_mode", "reference_kl_enabled", "reference_kl_coef", "external_prompt_passthrough"),
    doc="Settings of a :class:`engine.preference.MADPOTrainer` run (CoMLRL 1.4.3's ``MADPOConfig`` names and "
        "defaults first). ``train_batch_size`` pairs make one optimizer step (empty = ``rollout_buffer_size``, "
        "resolved when the config is made, as CoMLRL does); no gradient clipping unless ``max_grad_norm`` is set.",
)



class _Iterative(_Preference):
    iterative = True

    def __post_init__(self) -> None:
        if self.preference_pairs_per_sample is None:
            raise ValueError("preference_pairs_per_sample: the iterative trainers need a number (it fixes the steps "
                             "of an iteration)")
        super().__post_init__()


API_SETTINGS = ("comparator_api_url", "comparator_api_format", "comparator_api_model",
                "comparator_api_max_n_per_request", "comparator_api_timeout", "comparator_api_retries",
                "comparator_api_headers", "comparator_api_key", "comparator_api_key_env", "comparator_api_key_header",
                "comparator_api_key_prefix", "comparator_api_response_field", "comparator_api_extra_body")
ITERATIVE_SETTINGS = ("num_iterations", "comparator_policy", "comparator_history_k", "comparator_checkpoint",
                      "comparator_generation_mode", "comparator_centralized_agent_index", "comparator_model_name",
                      "comparator_agents", "comparator_devices", "comparator_num_candidates", *API_SETTINGS,
                      "preference_replay_mode", "preference_replay_k", "preference_replay_lambda",
                      "preference_replay_sample_size", "preference_replay_dir", "policy_checkpoint_dir",
                      "log_reward_distribution")
MADPOIterConfig = config_class(
    "MADPOIterConfig", (*MADPOConfig.field_names(), *ITERATIVE_SETTINGS), module=__name__,
    defaults={**DPO_DEFAULTS, "num_train_epochs": 1, "preference_num_candidates": 20,
              "preference_pairs_per_sample": 4, "pair_selection": "comparator_reward"},
    bases=(_Iterative, MADPOConfig), algorithm_name="madpo_iter", compat_only=MADPOConfig.compat_only,
    doc="Settings of a :class:`engine.preference.madpo_iter.MADPOIterTrainer` run (CoMLRL 1.4.3's "
        "``MADPOIterConfig`` names and defaults): ``num_iterations`` rounds of collect-then-train, candidates "
        "compared with ``comparator_policy``'s.",
)

class _Centralized(ConfigModel):
    def __post_init__(self) -> None:
        if self.collaboration_mode != "centralized":
            raise ValueError("collaboration_mode: CentralizedMAGRPOConfig is the centralized baseline; use "
                             "MAGRPOConfig for a team of decentralized agents")
        if self.num_turns != 1:
            raise ValueError("num_turns: centralized MAGRPO is single-turn (one completion holds every role); set 1")
        super().__post_init__()


CentralizedMAGRPOConfig = config_class(
    "CentralizedMAGRPOConfig", (*MAGRPOConfig.field_names(), "collaboration_mode"), module=__name__,
    defaults={"num_turns": 1, "collaboration_mode": "centralized"}, bases=(_Centralized, MAGRPOConfig),
    algorithm_name="centralized_magrpo",
    doc="Settings of a :class:`engine.preference.centralized_magrpo.CentralizedMAGRPOTrainer` run: "
        "``MAGRPOConfig`` plus ``collaboration_mode='centralized'`` (CoMLRL 1.4.3's ``CentralizedMAGRPOConfig``).",
)


REWARD_MODEL_SETTINGS = (
    "rl_algorithm", "reward_model_name", "reward_model_device", "reward_learning_rate", "reward_num_train_epochs",
    "reward_train_batch_size", "reward_max_length", "reward_freeze_backbone",
)


CRITIC_SETTINGS = ("critic_model_name", "critic_learning_rate", "critic_devices", "use_separate_critic", "critic_type",
                   "value_loss_coef", "value_clip_range", "critic_value_head_hidden_dim", "value_head_hidden_dim")


MARLHF_CRITIC_DEFAULTS = {"critic_learning_rate": None, "value_clip_range": 0.2}  # CoMLRL's MARLHFConfig


class _LearnedReward(ConfigModel):
    iterative: bool = False
    group_baseline = False  # checked below: only the MAGRPO-family RL stages need siblings

    def __post_init__(self) -> None:
        trainer = "MARLHFIter" if self.iterative else "MARLHF"
        _pair_problems(self, trainer, "MARLHFIterConfig", "the reward model scores whole joint answers")
        actor_critic = self.rl_algorithm in ACTOR_CRITIC
        if not actor_critic and self.num_generations < 2:
            raise ValueError(f"num_generations: must be >= 2 for rl_algorithm {self.rl_algorithm!r} (the group "
                             f"baseline needs siblings; iac/maac learn a critic instead)")
        if actor_critic and self.collaboration_mode == "centralized":
            raise ValueError(f"collaboration_mode: a centralized {trainer} runs a MAGRPO-family RL stage (one joint "
                             f"model, no critics); set rl_algorithm to magrpo, mareinforce, maremax or marloo")
        if actor_critic and self.iterative:
            raise ValueError("rl_algorithm: MARLHFIter runs a MAGRPO-family RL stage; iac/maac are MARLHF's (one "
                             "round of pairs); set rl_algorithm to magrpo, mareinforce, maremax or marloo")
        if self.rl_algorithm == "maac":  # one centralised critic: IAC's per-agent critic options do not apply
            for name, default in (("use_separate_critic", True), ("value_head_hidden_dim", None)):
                if getattr(self, name) != default:
                    raise ValueError(f"{name}: only rl_algorithm iac reads it (maac has one centralised critic); "
                                     f"leave it at its default ({default!r})")
        if not actor_critic:
            for name in CRITIC_SETTINGS:
                default = MARLHF_CRITIC_DEFAULTS.get(name, CATALOG[name].default)
                if getattr(self, name) != default:
                    raise ValueError(f"{name}: only rl_algorithm iac/maac has critics (this config has "
                                     f"{self.rl_algorithm!r}); leave it at its default ({default!r})")
        super().__post_init__()
        if not actor_critic:
            object.__setattr__(self, "advantage_mode", ALGORITHM_BASELINES[self.rl_algorithm])  # the RL baseline

    @property
    def effective_critic_learning_rate(self) -> float:
        """The critics' learning rate (``critic_learning_rate``, else the agents'), for iac/maac."""
        return self.critic_learning_rate if self.critic_learning_rate is not None else self.agent_learning_rate


MARLHFConfig = config_class(
    "MARLHFConfig", (*MAGRPOConfig.field_names(), *PREFERENCE_SETTINGS, *REWARD_MODEL_SETTINGS, *CRITIC_SETTINGS),
    module=__name__, defaults={**MADPO_DEFAULTS, **MARLHF_CRITIC_DEFAULTS}, bases=(_LearnedReward,),
    algorithm_name="marlhf",
    compat_only=("dpo_beta", "use_environment_step", "environment_steps_per_pair", "advantage_mode", "discount",
                 "early_termination_threshold", "external_prompt_passthrough"),
    doc="Settings of a :class:`engine.preference.marlhf.MARLHFTrainer` run (CoMLRL 1.4.3's ``MARLHFConfig`` "
        "names and defaults): the pairs' settings, the reward model's, and the settings of the RL stage "
        "(``rl_algorithm``: a MAGRPO-family baseline, or iac/maac with the critic settings).",
)


class _IterativeLearnedReward(_LearnedReward):
    iterative = True


MARLHFIterConfig = config_class(
    "MARLHFIterConfig", (*MARLHFConfig.field_names(), *ITERATIVE_SETTINGS, "preference_scoring_reward"),
    module=__name__,
    defaults={**MADPO_DEFAULTS, "num_train_epochs": 2, "preference_num_candidates": 20,
              "preference_pairs_per_sample": 4, "pair_selection": "comparator_reward", "reward_num_train_epochs": 2,
              **MARLHF_CRITIC_DEFAULTS},
    bases=(_IterativeLearnedReward, MARLHFConfig), algorithm_name="marlhf_iter",
    compat_only=(*MARLHFConfig.compat_only, *CRITIC_SETTINGS),
    doc="Settings of a :class:`engine.preference.marlhf_iter.MARLHFIterTrainer` run (CoMLRL 1.4.3's "
        "``MARLHFIterConfig`` names and defaults): ``num_iterations`` rounds of collect pairs against "
        "``comparator_policy``, refit the reward model, RL against it.",
)
