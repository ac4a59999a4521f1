"""Actor-critic configs: CoMLRL's ``IACConfig``/``MAACConfig`` field names and defaults, plus extras.

The CoMLRL block mirrors CoMLRL 1.4.3 (name and default), so ``IACConfig(...)`` calls from CoMLRL
scripts work unchanged. Departures, each deliberate:

* ``num_generations > 1`` works with ``num_turns > 1``: each of the K samples of an item continues
  as its own trajectory (K chains per item, no tree), so multi-turn runs are not forced to K = 1.
* ``early_termination_threshold`` defaults to ``None`` (off), as in :class:`engine.config.MAGRPOConfig`:
  CoMLRL's ``-0.2`` stops every trajectory after turn 1 when rewards are non-negative.
* ``value_clip_range`` clips every critic's update (CoMLRL clips only a value head on the actor);
  MAAC gains the field too (default ``None``: unclipped, as in CoMLRL).
* A MAAC critic is stepped once per joint sample (CoMLRL steps it once per agent, N times).

Every field is validated; an invalid value raises :class:`ValueError` starting with the field name.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any

_PARALLEL_ALIASES = {"none": "none", "null": "none", "mp": "mp"}


@dataclass
class ActorCriticConfig:
    """Fields shared by :class:`IACConfig` and :class:`MAACConfig` (CoMLRL's block first)."""

    # --- CoMLRL 1.4.3 fields -----------------------------------------------------------------
    agent_learning_rate: float = 5e-6
    critic_learning_rate: float | None = 5e-6
    """AdamW learning rate of the critics; ``None`` means ``agent_learning_rate``."""
    rollout_buffer_size: int = 8
    """Samples per agent (trajectory turns) collected before an update."""
    train_batch_size: int | None = None
    """Samples per optimizer step; ``None`` means ``rollout_buffer_size``."""
    value_loss_coef: float = 0.6
    """Weight of the value loss when actor and value head share one optimizer."""
    advantage_normalization: bool = True
    """z-normalise each agent's advantages over the turn's samples in the update."""
    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = None
    num_train_epochs: int = 40
    critic_type: str = "v"
    """``v``: V(history), read at the last prompt token; ``q``: Q(history, action), at the last reply token."""
    critic_value_head_hidden_dim: int | None = None
    """Hidden width of the critic's value head (Linear + Tanh before the output); ``None`` = linear head."""
    num_agents: int = 2
    num_turns: int = 2
    parallel_training: str = "none"
    agent_devices: str | list[str] | None = None
    critic_devices: str | list[str] | None = None
    """Device per critic (one string is broadcast); default: the agent's device."""
    external_prompt_passthrough: bool = False
    discount: float = 1.0
    """TD(0) targets ``r_t + discount * V(h_{t+1})``."""
    num_generations: int = 1
    """Samples per agent per item; each continues as its own trajectory in multi-turn runs."""
    eval_interval: int = 16
    eval_num_samples: int = 4
    eval_batch_size: int = 1
    early_termination_threshold: float | None = None
    """End a trajectory when the mean reward of its turn is above this; ``None`` = never."""
    logging_steps: int = 1
    reference_kl_enabled: bool = False
    """Subtract ``reference_kl_coef`` * (k3 KL to the initial model) from each agent's reward."""
    reference_kl_coef: float = 0.1
    reference_devices: str | list[str] | None = None

    # --- CoopLab extras ----------------------------------------------------------------------
    loss_type: str = "seq_sum"
    """``seq_sum``: -A * sum of token log-probs (CoMLRL); ``token_mean``: averaged over tokens."""
    max_grad_norm: float | None = 1.0
    """Clip each actor's and critic's gradient norm (``None`` = off, as CoMLRL)."""
    weight_decay: float = 0.01
    seed: int = 0
    shuffle: bool = False
    items_per_step: int = 1
    """Dataset items rolled out together (one batched generation per agent and turn)."""
    max_steps: int | None = None
    eval_greedy: bool = False
    checkpoint_interval: int = 0
    checkpoint_total_limit: int | None = 3
    transcripts_per_step: int = 2
    gradient_checkpointing: bool = False
    model_config: dict[str, Any] | None = None
    agent_names: list[str] | None = None

    def __post_init__(self) -> None:
        _positive_int(self, "rollout_buffer_size", "max_new_tokens", "num_train_epochs", "num_agents", "num_turns",
                      "num_generations", "eval_batch_size", "logging_steps", "items_per_step")
        _non_negative_int(self, "eval_interval", "eval_num_samples", "checkpoint_interval", "transcripts_per_step")
        for name in ("train_batch_size", "max_steps", "checkpoint_total_limit", "critic_value_head_hidden_dim"):
            if getattr(self, name) is not None:
                _positive_int(self, name)
        for name in ("agent_learning_rate", "temperature"):
            if not getattr(self, name) > 0:
                _fail(name, f"must be > 0, got {getattr(self, name)}")
        if self.critic_learning_rate is not None and not self.critic_learning_rate > 0:
            _fail("critic_learning_rate", f"must be > 0 or None, got {self.critic_learning_rate}")
        if not 0 < self.top_p <= 1:
            _fail("top_p", f"must be in (0, 1], got {self.top_p}")
        if self.top_k is not None and self.top_k < 0:
            _fail("top_k", f"must be >= 0 or None, got {self.top_k}")
        if not 0 <= self.discount <= 1:
            _fail("discount", f"must be in [0, 1], got {self.discount}")
        for name in ("value_loss_coef", "reference_kl_coef", "weight_decay"):
            if getattr(self, name) < 0:
                _fail(name, f"must be >= 0, got {getattr(self, name)}")
        if self.max_grad_norm is not None and not self.max_grad_norm > 0:
            _fail("max_grad_norm", f"must be > 0 or None, got {self.max_grad_norm}")
        self.critic_type = str(self.critic_type).lower()
        if self.critic_type not in ("v", "q"):
            _fail("critic_type", f"must be 'v' (state value) or 'q' (state-action value), got {self.critic_type!r}")
        parallel = str(self.parallel_training).lower()
        if parallel not in _PARALLEL_ALIASES:
            _fail("parallel_training", f"must be 'none' or 'mp', got {self.parallel_training!r}")
        self.parallel_training = _PARALLEL_ALIASES[parallel]
        if self.loss_type not in ("seq_sum", "token_mean"):
            _fail("loss_type", f"must be 'seq_sum' or 'token_mean', got {self.loss_type!r}")
        if self.parallel_training == "mp" and not self.agent_devices:
            _fail("agent_devices", "parallel_training='mp' needs agent_devices, e.g. ['cuda:0', 'cuda:1']")
        if self.model_config is not None and not isinstance(self.model_config, dict):
            _fail("model_config", f"must be a dict, got {type(self.model_config).__name__}")
        clip = getattr(self, "value_clip_range", None)
        if clip is not None and not clip > 0:
            _fail("value_clip_range", f"must be > 0 or None, got {clip}")

    @property
    def effective_train_batch_size(self) -> int:
        """Samples per optimizer step (``train_batch_size`` or ``rollout_buffer_size``)."""
        return self.train_batch_size or self.rollout_buffer_size

    @property
    def effective_critic_learning_rate(self) -> float:
        return self.critic_learning_rate if self.critic_learning_rate is not None else self.agent_learning_rate

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every field (for sinks, checkpoints and reports)."""
        return asdict(self)

    @classmethod
    def field_names(cls) -> list[str]:
        return [f.name for f in fields(cls)]


@dataclass
class IACConfig(ActorCriticConfig):
    """Independent actor-critic: every agent has its own critic (CoMLRL's ``IACConfig``)."""

    use_separate_critic: bool = True
    """True: a separate model + value head per agent, with its own optimizer; False: a value head on
    the agent's own backbone, trained with the actor by one optimizer (``value_loss_coef``)."""
    value_clip_range: float | None = 0.2
    """Clip each value's move from its rollout-time estimate (see :func:`targets.value_loss`)."""
    value_head_hidden_dim: int | None = None
    """Hidden width of a value head on the actor's backbone (``use_separate_critic=False``)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.value_head_hidden_dim is not None:
            _positive_int(self, "value_head_hidden_dim")


@dataclass
class MAACConfig(ActorCriticConfig):
    """Multi-agent actor-critic: one centralised critic reads every agent's observation (CoMLRL's ``MAACConfig``)."""

    value_clip_range: float | None = None
    """Clip the critic's value moves (CoopLab extra; ``None`` = unclipped as in CoMLRL)."""


def _fail(name: str, message: str) -> None:
    raise ValueError(f"{name}: {message}")


def _positive_int(cfg: Any, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            _fail(name, f"must be an integer >= 1, got {value!r}")


def _non_negative_int(cfg: Any, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            _fail(name, f"must be an integer >= 0, got {value!r}")
