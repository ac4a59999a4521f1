"""``MADPOConfig`` and ``CentralizedMAGRPOConfig``: CoMLRL 1.4.3's field names and defaults, plus
CoopLab's extras.

The settings come from :mod:`engine.schema.catalog`. CoMLRL's ``MADPOConfig`` extends its
``MAGRPOConfig``, so a CoMLRL script may pass any MAGRPO field; every one is accepted here. The
MAGRPO-only ones MADPO never reads (``num_generations``, ``discount``, advantage and reference-KL
settings) are the catalog's ``compat_only`` for madpo (a class's ``compat_only``): they are accepted
for ports, and the run config refuses them for ``madpo``.

Departures from CoMLRL, each deliberate (see docs/preference.md):

* ``reference_free`` defaults to False: the margin is anchored on the frozen initial policy
  (standard DPO). CoMLRL has only the reference-free form (``reference_free=True``), which weighs a
  pair by how much the initial policy already prefers its winner; with summed log-probs short winners
  start saturated and teach almost nothing (issue 39, docs/preference.md).
* ``joint_mode="cross"`` pairs joint candidates of the K^N product (CoMLRL refuses it).
* ``seed`` seeds the pair order and random pair selection (CoMLRL shuffles with the global RNG).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from engine.schema.catalog import ACTOR_CRITIC, ALGORITHM_BASELINES, CATALOG
from engine.schema.configs import MAGRPOConfig
from engine.schema.derive import ConfigModel, catalog_dataclass, run_config_settings


class _Pairs(ConfigModel):
    """The preference configs' shared base: what :func:`_pair_problems` reads."""

    iterative: bool = False
    if TYPE_CHECKING:  # fields of the generated classes below
        collaboration_mode: Literal["decentralized", "centralized"]
        comparator_generation_mode: Literal["decentralized", "centralized"]
        num_turns: int
        pair_selection: Literal["reward_gap", "all", "random", "comparator_reward"]
        preference_pairs_per_sample: int | None


def _pair_problems(config: _Pairs, trainer: str, iterative_config: str, what: str) -> None:
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


class _Preference(_Pairs):
    def __post_init__(self) -> None:
        _pair_problems(self, "MADPOIter" if self.iterative else "MADPO", "MADPOIterConfig",
                       "pairs compare whole joint answers")
        super().__post_init__()


class _Iterative(_Preference):
    iterative = True

    def __post_init__(self) -> None:
        if self.preference_pairs_per_sample is None:
            raise ValueError("preference_pairs_per_sample: the iterative trainers need a number (it fixes the steps "
                             "of an iteration)")
        super().__post_init__()


class _Centralized(ConfigModel):
    if TYPE_CHECKING:  # fields of the generated classes below
        collaboration_mode: Literal["decentralized", "centralized"]
        num_turns: int

    def __post_init__(self) -> None:
        if self.collaboration_mode != "centralized":
            raise ValueError("collaboration_mode: CentralizedMAGRPOConfig is the centralized baseline; use "
                             "MAGRPOConfig for a team of decentralized agents")
        if self.num_turns != 1:
            raise ValueError("num_turns: centralized MAGRPO is single-turn (one completion holds every role); set 1")
        super().__post_init__()


# The critics' settings (the run config's trainer.actor_critic section): marlhf reads them with an iac/maac
# stage; those maac does not read belong to iac's per-agent critics.
CRITIC_SETTINGS = run_config_settings("actor_critic")
IAC_ONLY_CRITIC_SETTINGS = tuple(name for name in CRITIC_SETTINGS
                                 if "iac" in CATALOG[name].reads and "maac" not in CATALOG[name].reads)


class _LearnedReward(_Pairs):
    if TYPE_CHECKING:  # fields of the generated classes below
        rl_algorithm: Literal["magrpo", "mareinforce", "maremax", "marloo", "iac", "maac"]
        critic_learning_rate: float | None
        agent_learning_rate: float

    def __post_init__(self) -> None:
        trainer = "MARLHFIter" if self.iterative else "MARLHF"
        _pair_problems(self, trainer, "MARLHFIterConfig", "the reward model scores whole joint answers")
        actor_critic = self.rl_algorithm in ACTOR_CRITIC
        if actor_critic and self.collaboration_mode == "centralized":
            raise ValueError(f"collaboration_mode: a centralized {trainer} runs a MAGRPO-family RL stage (one joint "
                             f"model, no critics); set rl_algorithm to magrpo, mareinforce, maremax or marloo")
        if actor_critic and self.iterative:
            raise ValueError("rl_algorithm: MARLHFIter runs a MAGRPO-family RL stage; iac/maac are MARLHF's (one "
                             "round of pairs); set rl_algorithm to magrpo, mareinforce, maremax or marloo")
        if self.rl_algorithm == "maac":  # one centralised critic: IAC's per-agent critic options do not apply
            for name in IAC_ONLY_CRITIC_SETTINGS:
                default = CATALOG[name].default
                if getattr(self, name) != default:
                    raise ValueError(f"{name}: only rl_algorithm iac reads it (maac has one centralised critic); "
                                     f"leave it at its default ({default!r})")
        if not actor_critic:
            for name in CRITIC_SETTINGS:
                default = self.field_default(name)  # CoMLRL's MARLHFConfig's own
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


class _IterativeLearnedReward(_LearnedReward):
    iterative = True


# --- generated from engine.schema.catalog by `python -m engine.schema.write_configs`: edit the catalog and rerun ---


@catalog_dataclass
class MADPOConfig(_Preference):
    """Settings of a :class:`engine.preference.MADPOTrainer` run (CoMLRL 1.4.3's ``MADPOConfig`` names and
    defaults first). ``train_batch_size`` pairs make one optimizer step (empty = ``rollout_buffer_size``,
    resolved when the config is made, as CoMLRL does); no gradient clipping unless ``max_grad_norm`` is set."""

    algorithm_name = 'madpo'
    compat_only: ClassVar[tuple[str, ...]] = (
        'num_generations',
        'discount',
        'early_termination_threshold',
        'external_prompt_passthrough',
        'advantage_normalization',
        'advantage_mode',
        'reference_kl_enabled',
        'reference_kl_coef',
    )

    num_train_epochs: int = 20
    agent_learning_rate: float = 5e-06
    logging_steps: int = 50
    num_agents: int = 2
    parallel_training: Literal['auto', 'none', 'mp', 'fsdp'] = 'auto'
    agent_devices: list[str] | None = None
    num_generations: int = 4
    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50
    num_turns: int = 1
    discount: float = 1.0
    joint_mode: Literal['aligned', 'cross'] = 'aligned'
    early_termination_threshold: float | None = None
    external_prompt_passthrough: bool = False
    eval_interval: int = 16
    eval_num_samples: int = 4
    eval_batch_size: int = 1
    rollout_buffer_size: int = 2
    train_batch_size: int | None = None
    advantage_normalization: bool = True
    advantage_mode: Literal['mean', 'raw', 'max', 'rloo'] | None = 'mean'
    reference_kl_enabled: bool = False
    reference_kl_coef: float = 0.1
    reference_devices: list[str] | None = None
    turn_order: Literal['simultaneous', 'sequential'] = 'simultaneous'
    loss_type: Literal['seq_sum', 'token_mean'] = 'seq_sum'
    max_steps: int | None = None
    items_per_step: int | None = None
    seed: int | None = None
    checkpoint_interval: int = 0
    transcripts_per_step: int = 2
    agent_names: list[str] | None = None
    weight_decay: float = 0.01
    max_grad_norm: float | None = None
    lr_scheduler: Literal['constant', 'linear', 'cosine'] = 'constant'
    warmup_steps: int = 0
    micro_batch_size: int | None = None
    gradient_checkpointing: bool = False
    logits_chunk_mib: int = 512
    collaboration_mode: Literal['decentralized', 'centralized'] = 'decentralized'
    fast_decode: bool = True
    decode_graphs: Literal['auto', 'on', 'off'] = 'auto'
    rollout_dtype: Literal['auto', 'float32', 'bfloat16', 'float16'] | None = None
    rollout_backend: Literal['hf', 'vllm'] = 'hf'
    vllm_python: str = '.venv-vllm/bin/python'
    model_config: dict[str, Any] | None = None
    eval_samples_per_item: int = 1
    eval_greedy: bool = False
    checkpoint_total_limit: int | None = 3
    best_checkpoint_metric: str | None = None
    best_checkpoint_mode: Literal['max', 'min'] = 'max'
    preference_num_candidates: int = 80
    preference_pairs_per_sample: int | None = 16
    pair_selection: Literal['reward_gap', 'all', 'random', 'comparator_reward'] = 'reward_gap'
    dpo_beta: float = 0.1
    reference_free: bool = False
    use_environment_step: bool = True
    environment_steps_per_pair: int = 2


@catalog_dataclass
class MADPOIterConfig(_Iterative, MADPOConfig):
    """Settings of a :class:`engine.preference.madpo_iter.MADPOIterTrainer` run (CoMLRL 1.4.3's
    ``MADPOIterConfig`` names and defaults): ``num_iterations`` rounds of collect-then-train, candidates
    compared with ``comparator_policy``'s."""

    algorithm_name = 'madpo_iter'
    compat_only: ClassVar[tuple[str, ...]] = (
        'num_generations',
        'discount',
        'early_termination_threshold',
        'external_prompt_passthrough',
        'advantage_normalization',
        'advantage_mode',
        'reference_kl_enabled',
        'reference_kl_coef',
    )

    num_train_epochs: int = 1
    preference_num_candidates: int = 20
    preference_pairs_per_sample: int | None = 4
    pair_selection: Literal['reward_gap', 'all', 'random', 'comparator_reward'] = 'comparator_reward'
    num_iterations: int = 6
    comparator_policy: Literal['current', 'current_copy', 'model', 'history', 'api'] = 'current'
    comparator_generation_mode: Literal['decentralized', 'centralized'] = 'decentralized'
    comparator_centralized_agent_index: int = 0
    comparator_model_name: str | None = None
    comparator_agents: list[str] | None = None
    comparator_devices: list[str] | None = None
    comparator_num_candidates: int | None = None
    comparator_history_k: int | None = None
    preference_replay_mode: Literal['current', 'nearest_k', 'all_history', 'lambda_decay'] = 'current'
    preference_replay_k: int | None = None
    preference_replay_lambda: float | None = None
    preference_replay_sample_size: int | None = None
    comparator_checkpoint: str | None = None
    comparator_api_url: str | None = None
    comparator_api_format: Literal['generic', 'openai_chat', 'anthropic_messages', 'openai_responses'] = 'generic'
    comparator_api_model: str | None = None
    comparator_api_max_n_per_request: int | None = None
    comparator_api_timeout: float = 120.0
    comparator_api_retries: int = 2
    comparator_api_headers: dict[str, str] | None = None
    comparator_api_key: str | None = None
    comparator_api_key_env: str | None = None
    comparator_api_key_header: str = 'Authorization'
    comparator_api_key_prefix: str = 'Bearer'
    comparator_api_response_field: str = 'completions'
    comparator_api_extra_body: dict[str, Any] | None = None
    policy_checkpoint_dir: str | None = None
    preference_replay_dir: str | None = None
    log_reward_distribution: bool = False


@catalog_dataclass
class CentralizedMAGRPOConfig(_Centralized, MAGRPOConfig):
    """Settings of a :class:`engine.preference.centralized_magrpo.CentralizedMAGRPOTrainer` run:
    ``MAGRPOConfig`` plus ``collaboration_mode='centralized'`` (CoMLRL 1.4.3's ``CentralizedMAGRPOConfig``)."""

    algorithm_name = 'centralized_magrpo'
    compat_only: ClassVar[tuple[str, ...]] = ()

    num_turns: int = 1
    collaboration_mode: Literal['decentralized', 'centralized'] = 'centralized'


@catalog_dataclass
class MARLHFConfig(_LearnedReward):
    """Settings of a :class:`engine.preference.marlhf.MARLHFTrainer` run (CoMLRL 1.4.3's ``MARLHFConfig``
    names and defaults): the pairs' settings, the reward model's, and the settings of the RL stage
    (``rl_algorithm``: a MAGRPO-family baseline, or iac/maac with the critic settings)."""

    algorithm_name = 'marlhf'
    compat_only: ClassVar[tuple[str, ...]] = (
        'discount',
        'early_termination_threshold',
        'external_prompt_passthrough',
        'advantage_mode',
        'dpo_beta',
        'use_environment_step',
        'environment_steps_per_pair',
    )

    num_train_epochs: int = 20
    agent_learning_rate: float = 5e-06
    logging_steps: int = 50
    num_agents: int = 2
    parallel_training: Literal['auto', 'none', 'mp', 'fsdp'] = 'auto'
    agent_devices: list[str] | None = None
    num_generations: int = 4
    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50
    num_turns: int = 1
    discount: float = 1.0
    joint_mode: Literal['aligned', 'cross'] = 'aligned'
    early_termination_threshold: float | None = None
    external_prompt_passthrough: bool = False
    eval_interval: int = 16
    eval_num_samples: int = 4
    eval_batch_size: int = 1
    rollout_buffer_size: int = 2
    train_batch_size: int | None = None
    advantage_normalization: bool = True
    advantage_mode: Literal['mean', 'raw', 'max', 'rloo'] | None = 'mean'
    reference_kl_enabled: bool = False
    reference_kl_coef: float = 0.1
    reference_devices: list[str] | None = None
    turn_order: Literal['simultaneous', 'sequential'] = 'simultaneous'
    loss_type: Literal['seq_sum', 'token_mean'] = 'seq_sum'
    max_steps: int | None = None
    items_per_step: int | None = None
    seed: int | None = None
    checkpoint_interval: int = 0
    transcripts_per_step: int = 2
    agent_names: list[str] | None = None
    shuffle: bool = False
    weight_decay: float = 0.01
    max_grad_norm: float | None = 1.0
    lr_scheduler: Literal['constant', 'linear', 'cosine'] = 'constant'
    warmup_steps: int = 0
    clip_epsilon: float | None = None
    num_inner_epochs: int = 1
    micro_batch_size: int | None = None
    gradient_checkpointing: bool = False
    logits_chunk_mib: int = 512
    collaboration_mode: Literal['decentralized', 'centralized'] = 'decentralized'
    per_agent_normalization: bool = False
    credit_assignment: Literal['group', 'counterfactual', 'turn_group'] = 'group'
    credit_samples: int = 0
    reference_kl_mode: Literal['reward', 'loss'] = 'reward'
    fast_decode: bool = True
    decode_graphs: Literal['auto', 'on', 'off'] = 'auto'
    rollout_dtype: Literal['auto', 'float32', 'bfloat16', 'float16'] | None = None
    rollout_correction: Literal['auto', 'tis', 'none'] = 'auto'
    tis_cap: float = 2.0
    rollout_backend: Literal['hf', 'vllm'] = 'hf'
    vllm_python: str = '.venv-vllm/bin/python'
    model_config: dict[str, Any] | None = None
    eval_samples_per_item: int = 1
    eval_greedy: bool = False
    checkpoint_total_limit: int | None = 3
    best_checkpoint_metric: str | None = None
    best_checkpoint_mode: Literal['max', 'min'] = 'max'
    critic_type: Literal['v', 'q'] = 'v'
    critic_learning_rate: float | None = None
    value_clip_range: float | None = 0.2
    value_loss_coef: float = 0.6
    use_separate_critic: bool = True
    critic_value_head_hidden_dim: int | None = None
    value_head_hidden_dim: int | None = None
    critic_model_name: str | None = None
    critic_devices: list[str] | None = None
    preference_num_candidates: int = 80
    preference_pairs_per_sample: int | None = 16
    pair_selection: Literal['reward_gap', 'all', 'random', 'comparator_reward'] = 'reward_gap'
    dpo_beta: float = 0.1
    use_environment_step: bool = True
    environment_steps_per_pair: int = 2
    rl_algorithm: Literal['magrpo', 'mareinforce', 'maremax', 'marloo', 'iac', 'maac'] = 'magrpo'
    reward_model_name: str | None = None
    reward_model_device: str | None = None
    reward_learning_rate: float = 1e-05
    reward_num_train_epochs: int = 1
    reward_train_batch_size: int = 1
    reward_max_length: int | None = None
    reward_freeze_backbone: bool = False


@catalog_dataclass
class MARLHFIterConfig(_IterativeLearnedReward, MARLHFConfig):
    """Settings of a :class:`engine.preference.marlhf_iter.MARLHFIterTrainer` run (CoMLRL 1.4.3's
    ``MARLHFIterConfig`` names and defaults): ``num_iterations`` rounds of collect pairs against
    ``comparator_policy``, refit the reward model, RL against it."""

    algorithm_name = 'marlhf_iter'
    compat_only: ClassVar[tuple[str, ...]] = (
        'discount',
        'early_termination_threshold',
        'external_prompt_passthrough',
        'advantage_mode',
        'critic_type',
        'critic_learning_rate',
        'value_clip_range',
        'value_loss_coef',
        'use_separate_critic',
        'critic_value_head_hidden_dim',
        'value_head_hidden_dim',
        'critic_model_name',
        'critic_devices',
        'dpo_beta',
        'use_environment_step',
        'environment_steps_per_pair',
    )

    num_train_epochs: int = 2
    preference_num_candidates: int = 20
    preference_pairs_per_sample: int | None = 4
    pair_selection: Literal['reward_gap', 'all', 'random', 'comparator_reward'] = 'comparator_reward'
    num_iterations: int = 6
    comparator_policy: Literal['current', 'current_copy', 'model', 'history', 'api'] = 'current'
    comparator_generation_mode: Literal['decentralized', 'centralized'] = 'decentralized'
    comparator_centralized_agent_index: int = 0
    comparator_model_name: str | None = None
    comparator_agents: list[str] | None = None
    comparator_devices: list[str] | None = None
    comparator_num_candidates: int | None = None
    comparator_history_k: int | None = None
    preference_replay_mode: Literal['current', 'nearest_k', 'all_history', 'lambda_decay'] = 'current'
    preference_replay_k: int | None = None
    preference_replay_lambda: float | None = None
    preference_replay_sample_size: int | None = None
    comparator_checkpoint: str | None = None
    comparator_api_url: str | None = None
    comparator_api_format: Literal['generic', 'openai_chat', 'anthropic_messages', 'openai_responses'] = 'generic'
    comparator_api_model: str | None = None
    comparator_api_max_n_per_request: int | None = None
    comparator_api_timeout: float = 120.0
    comparator_api_retries: int = 2
    comparator_api_headers: dict[str, str] | None = None
    comparator_api_key: str | None = None
    comparator_api_key_env: str | None = None
    comparator_api_key_header: str = 'Authorization'
    comparator_api_key_prefix: str = 'Bearer'
    comparator_api_response_field: str = 'completions'
    comparator_api_extra_body: dict[str, Any] | None = None
    policy_checkpoint_dir: str | None = None
    preference_replay_dir: str | None = None
    log_reward_distribution: bool = False
    reward_num_train_epochs: int = 2
    preference_scoring_reward: Literal['task', 'reward_model'] = 'task'


# --- end of the generated config classes ---
