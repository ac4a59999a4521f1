"""Trainer configuration: CoMLRL's ``MAGRPOConfig`` field names and defaults, plus CoopLab's extras.

The settings come from :mod:`engine.schema.catalog` (each declared once, with its bounds, description
and the algorithms that read it); a class has the settings its algorithm reads. CoMLRL 1.4.3's fields
come first, in its order and with its defaults (``COMLRL_ORDER``), so a CoMLRL script's
``MAGRPOConfig(...)`` call works unchanged; what CoMLRL lacks (clipping, schedules, seeds, checkpoints,
reporting) follows. Values are validated on construction and on assignment, and an invalid value
raises :class:`ValueError` whose message starts with the field name. ``advantage_mode=None`` means the
algorithm's baseline.

Two deliberate departures from CoMLRL's defaults:

* ``early_termination_threshold`` defaults to ``None`` (off). CoMLRL's ``-0.2`` stops expanding a
  branch once the node's mean reward is *above* -0.2, which only means "nearly solved" for tasks
  whose rewards are shifted to be <= 0 (its code task shifts by -4). With ordinary non-negative
  rewards every branch would stop after turn 1 and multi-turn training would silently become
  single-turn. Set it explicitly when your reward scale makes it meaningful.
* ``discount`` is honoured: returns are ``r_t + discount * mean(child returns)`` (CoMLRL 1.4.3
  ignores it and always sums undiscounted).
"""

from __future__ import annotations

from typing import Any, ClassVar, Literal

from engine.schema.derive import ConfigModel, catalog_dataclass

# --- generated from engine.schema.catalog by `python -m engine.schema.write_configs`: edit the catalog and rerun ---


@catalog_dataclass
class MAGRPOConfig(ConfigModel):
    """Settings of a :class:`engine.trainer.MAGRPOTrainer` run (CoMLRL 1.4.3's names and defaults first)."""

    algorithm_name = 'magrpo'
    compat_only: ClassVar[tuple[str, ...]] = ()

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
    num_turns: int = 2
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
    fsdp_ranks: int | None = None
    fsdp_cpu_offload: bool = False
    model_config: dict[str, Any] | None = None
    eval_samples_per_item: int = 1
    eval_greedy: bool = False
    checkpoint_total_limit: int | None = 3
    best_checkpoint_metric: str | None = None
    best_checkpoint_mode: Literal['max', 'min'] = 'max'


@catalog_dataclass
class MAREINFORCEConfig(MAGRPOConfig):
    """MAGRPO with no baseline (``advantage_mode='raw'``), as CoMLRL's MAREINFORCE."""

    algorithm_name = 'mareinforce'
    compat_only: ClassVar[tuple[str, ...]] = ()
    forced_advantage_mode = 'raw'


@catalog_dataclass
class MAReMaxConfig(MAGRPOConfig):
    """MAGRPO with the group maximum as baseline (``advantage_mode='max'``), as CoMLRL's MAReMax."""

    algorithm_name = 'maremax'
    compat_only: ClassVar[tuple[str, ...]] = ()
    forced_advantage_mode = 'max'


@catalog_dataclass
class MARLOOConfig(MAGRPOConfig):
    """MAGRPO with the leave-one-out baseline (``advantage_mode='rloo'``), as CoMLRL's MARLOO."""

    algorithm_name = 'marloo'
    compat_only: ClassVar[tuple[str, ...]] = ()
    forced_advantage_mode = 'rloo'


# --- end of the generated config classes ---
