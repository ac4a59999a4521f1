"""Actor-critic configs: CoMLRL's ``IACConfig``/``MAACConfig`` field names and defaults, plus extras.

The settings come from :mod:`engine.schema.catalog` (a class has those its algorithm reads, CoMLRL's
first); this module sets CoMLRL's actor-critic defaults where they differ from MAGRPO's (``top_k``
off, 40 epochs, a buffer of 8, one sample per item, logging every step). ``IACConfig(...)`` calls
from CoMLRL scripts work unchanged. Departures, each deliberate:

* ``num_generations > 1`` works with ``num_turns > 1``: each of the K samples of an item continues
  as its own trajectory (K chains per item, no tree), so multi-turn runs are not forced to K = 1.
* ``early_termination_threshold`` defaults to ``None`` (off), as in :class:`engine.schema.configs.MAGRPOConfig`:
  CoMLRL's ``-0.2`` stops every trajectory after turn 1 when rewards are non-negative.
* ``value_clip_range`` clips every critic's update (CoMLRL clips only a value head on the actor);
  MAAC gains the field too (default ``None``: unclipped, as in CoMLRL).
* A MAAC critic is stepped once per joint sample (CoMLRL steps it once per agent, N times).

Every field is validated; an invalid value raises :class:`ValueError` starting with the field name.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Literal

from engine.schema.derive import ConfigModel, catalog_dataclass


class _ActorCritic(ConfigModel):
    if TYPE_CHECKING:  # fields of the generated classes below
        critic_learning_rate: float | None
        agent_learning_rate: float

    @property
    def effective_critic_learning_rate(self) -> float:
        """The critics' learning rate (``critic_learning_rate``, else the agents')."""
        return self.critic_learning_rate if self.critic_learning_rate is not None else self.agent_learning_rate


# --- generated from engine.schema.catalog by `python -m engine.schema.write_configs`: edit the catalog and rerun ---


@catalog_dataclass
class ActorCriticConfig(_ActorCritic):
    """Settings shared by :class:`IACConfig` and :class:`MAACConfig` (CoMLRL's first)."""


    agent_learning_rate: float = 5e-06
    critic_learning_rate: float | None = 5e-06
    rollout_buffer_size: int = 8
    train_batch_size: int | None = None
    value_loss_coef: float = 0.6
    advantage_normalization: bool = True
    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = None
    num_train_epochs: int = 40
    critic_type: Literal['v', 'q'] = 'v'
    critic_value_head_hidden_dim: int | None = None
    num_agents: int = 2
    num_turns: int = 2
    parallel_training: Literal['auto', 'none', 'mp', 'fsdp'] = 'auto'
    agent_devices: list[str] | None = None
    critic_devices: list[str] | None = None
    external_prompt_passthrough: bool = False
    discount: float = 1.0
    num_generations: int = 1
    eval_interval: int = 16
    eval_num_samples: int = 4
    eval_batch_size: int = 1
    early_termination_threshold: float | None = None
    logging_steps: int = 1
    reference_kl_enabled: bool = False
    reference_kl_coef: float = 0.1
    reference_devices: list[str] | None = None
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
    gradient_checkpointing: bool = False
    logits_chunk_mib: int = 512
    rollout_dtype: Literal['auto', 'float32', 'bfloat16', 'float16'] | None = None
    rollout_backend: Literal['hf', 'vllm'] = 'hf'
    vllm_python: str = '.venv-vllm/bin/python'
    model_config: dict[str, Any] | None = None
    eval_greedy: bool = False
    checkpoint_total_limit: int | None = 3
    best_checkpoint_metric: str | None = None
    best_checkpoint_mode: Literal['max', 'min'] = 'max'
    value_clip_range: float | None = None


@catalog_dataclass
class IACConfig(ActorCriticConfig):
    """Independent actor-critic: every agent has its own critic (CoMLRL's ``IACConfig``).
    ``use_separate_critic=False`` puts a value head on the agent's own backbone, trained with the actor
    by one optimizer (``value_loss_coef``)."""

    algorithm_name = 'iac'
    compat_only: ClassVar[tuple[str, ...]] = ()

    value_clip_range: float | None = 0.2
    use_separate_critic: bool = True
    value_head_hidden_dim: int | None = None


@catalog_dataclass
class MAACConfig(ActorCriticConfig):
    """Multi-agent actor-critic: one centralised critic reads every agent's observation (CoMLRL's
    ``MAACConfig``); ``value_clip_range`` is a CoopLab extra (``None`` = unclipped as in CoMLRL)."""

    algorithm_name = 'maac'
    compat_only: ClassVar[tuple[str, ...]] = ()


# --- end of the generated config classes ---
