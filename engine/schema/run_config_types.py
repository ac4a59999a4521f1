"""The run config's sections as the type checker reads them (:mod:`engine.schema.run_config` builds them
with ``create_model`` from the catalog, which mypy cannot follow).

Written by ``python -m engine.schema.write_configs`` from the built classes; a test compares. Imported
only by type checkers (``if TYPE_CHECKING`` in :mod:`engine.schema.run_config`)."""

from __future__ import annotations

from typing import Any, Literal

from engine.schema.run_config_sections import _AgentIdentity, _GivenOnly, _TrainerRules


class AgentSpec(_AgentIdentity):
    """One agent of the team: its own causal LM, tokenizer, optimizer and sampling settings, and optionally a LoRA adapter (lora_* settings, declared in engine.schema.catalog)."""

    device: str | None = None
    learning_rate: float | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None
    max_new_tokens: int | None = None
    model_kwargs: dict[str, Any] = dict()
    lora_rank: int | None = None
    lora_alpha: float = 16.0
    lora_dropout: float = 0.0
    lora_target_modules: list[str] | None = None


class ActorCriticSection(_GivenOnly):
    """The iac/maac-only settings (also marlhf's with rl_algorithm iac/maac); unset ones keep the algorithm's own defaults (IACConfig/MAACConfig/MARLHFConfig)."""

    critic_type: Literal['v', 'q'] = 'v'
    critic_learning_rate: float | None = 5e-06
    value_clip_range: float | None = None
    value_loss_coef: float = 0.6
    use_separate_critic: bool = True
    critic_value_head_hidden_dim: int | None = None
    value_head_hidden_dim: int | None = None
    critic_model_name: str | None = None
    critic_devices: list[str] | None = None


class TrainerSpec(_TrainerRules):
    """Trainer settings of a run config (each declared once in engine.schema.catalog)."""

    algorithm: Literal['magrpo', 'grpo', 'mareinforce', 'maremax', 'marloo', 'iac', 'maac', 'madpo', 'centralized_magrpo', 'marlhf', 'madpo_iter', 'marlhf_iter'] = 'magrpo'
    num_generations: int = 4
    num_turns: int = 1
    joint_mode: Literal['aligned', 'cross'] = 'aligned'
    turn_order: Literal['simultaneous', 'sequential'] = 'simultaneous'
    loss_type: Literal['seq_sum', 'token_mean'] = 'seq_sum'
    agent_learning_rate: float = 5e-06
    num_train_epochs: int = 20
    max_steps: int | None = None
    items_per_step: int | None = None
    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50
    device: str = 'cpu'
    seed: int = 0
    eval_interval: int = 16
    checkpoint_interval: int = 0
    transcripts_per_step: int = 2
    shuffle: bool = False
    weight_decay: float = 0.01
    max_grad_norm: float | None = 1.0
    lr_scheduler: Literal['constant', 'linear', 'cosine'] = 'constant'
    warmup_steps: int = 0
    clip_epsilon: float | None = None
    num_inner_epochs: int = 1
    rollout_buffer_size: int = 2
    train_batch_size: int | None = None
    micro_batch_size: int | None = None
    gradient_checkpointing: bool = False
    logits_chunk_mib: int = 512
    discount: float = 1.0
    collaboration_mode: Literal['decentralized', 'centralized'] | None = None
    early_termination_threshold: float | None = None
    external_prompt_passthrough: bool = False
    advantage_mode: Literal['mean', 'raw', 'max', 'rloo'] | None = None
    advantage_normalization: bool = True
    per_agent_normalization: bool = False
    credit_assignment: Literal['group', 'counterfactual', 'turn_group'] = 'group'
    credit_samples: int = 0
    reference_kl_enabled: bool = False
    reference_kl_coef: float = 0.1
    reference_kl_mode: Literal['reward', 'loss'] = 'reward'
    fast_decode: bool = True
    decode_graphs: Literal['auto', 'on', 'off'] = 'auto'
    rollout_dtype: Literal['auto', 'float32', 'bfloat16', 'float16'] | None = None
    rollout_correction: Literal['auto', 'tis', 'none'] = 'auto'
    tis_cap: float = 2.0
    rollout_backend: Literal['hf', 'vllm'] = 'hf'
    parallel_training: Literal['auto', 'none', 'mp', 'fsdp'] = 'auto'
    fsdp_ranks: int | None = None
    fsdp_cpu_offload: bool = False
    agent_devices: list[str] | None = None
    reference_devices: list[str] | None = None
    torch_dtype: Literal['auto', 'float32', 'bfloat16', 'float16'] = 'float32'
    logging_steps: int = 1
    eval_num_samples: int = 4
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
    comparator_api_key_env: str | None = None
    comparator_api_key_header: str = 'Authorization'
    comparator_api_key_prefix: str = 'Bearer'
    comparator_api_response_field: str = 'completions'
    comparator_api_extra_body: dict[str, Any] | None = None
    policy_checkpoint_dir: str | None = None
    preference_replay_dir: str | None = None
    log_reward_distribution: bool = False
    rl_algorithm: Literal['magrpo', 'mareinforce', 'maremax', 'marloo', 'iac', 'maac'] = 'magrpo'
    reward_model_name: str | None = None
    reward_model_device: str | None = None
    reward_learning_rate: float = 1e-05
    reward_num_train_epochs: int = 1
    reward_train_batch_size: int = 1
    reward_max_length: int | None = None
    reward_freeze_backbone: bool = False
    preference_scoring_reward: Literal['task', 'reward_model'] = 'task'
    actor_critic: ActorCriticSection = ActorCriticSection()
