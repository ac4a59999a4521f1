"""Trainer configuration: CoMLRL's ``MAGRPOConfig`` field names and defaults, plus CoopLab's extras.

The first block of fields mirrors CoMLRL 1.4.3 exactly (name and default), so a CoMLRL script's
``MAGRPOConfig(...)`` call works unchanged. The second block adds what CoMLRL lacks (clipping,
schedules, seeds, checkpoints, reporting). Every field is validated in ``__post_init__`` and an
invalid value raises :class:`ValueError` whose message starts with the field name.

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

from dataclasses import asdict, dataclass, field, fields
from typing import Any

_JOINT_MODE_ALIASES = {"aligned": "aligned", "align": "aligned", "cross": "cross", "crossed": "cross"}
_PARALLEL_ALIASES = {"none": "none", "null": "none", "mp": "mp"}
ADVANTAGE_MODES = ("mean", "raw", "max", "rloo")


@dataclass
class MAGRPOConfig:
    """Settings of a :class:`engine.trainer.MAGRPOTrainer` run.

    CoMLRL fields (same names and defaults as CoMLRL 1.4.3's ``MAGRPOConfig``):
    """

    # --- CoMLRL 1.4.3 fields -----------------------------------------------------------------
    num_train_epochs: int = 20
    """Passes over the training set."""
    agent_learning_rate: float = 5e-6
    """AdamW learning rate of every agent (per-agent overrides come from the trainer's constructor)."""
    logging_steps: int = 50
    """Report training metrics every this many training steps (CoMLRL counts env steps; we count steps)."""
    num_agents: int = 2
    """Kept for compatibility: like CoMLRL, the team size comes from the trainer's ``agents``/``num_agents``."""
    parallel_training: str = "none"
    """``none`` (agents one after another on one device) or ``mp`` (each agent on its own device, concurrently)."""
    agent_devices: str | list[str] | None = None
    """Device per agent (one string is broadcast); ``mp`` requires it."""
    num_generations: int = 4
    """K: samples per agent per node of the rollout tree (>= 2: the baseline needs siblings)."""
    max_new_tokens: int = 256
    temperature: float = 0.6
    top_p: float = 0.6
    top_k: int | None = 50
    num_turns: int = 2
    """Turns per episode; more than one needs an ``external_transition``."""
    discount: float = 1.0
    """Weight of later-turn returns: ``R_t = r_t + discount * mean(children's R)``."""
    joint_mode: str = "aligned"
    """``aligned``: K joint actions (sample j of every agent); ``cross``: all K^N combinations."""
    early_termination_threshold: float | None = None
    """Stop expanding a branch when its node's mean reward is above this; ``None`` = never (see module doc)."""
    external_prompt_passthrough: bool = False
    """Use the transition's prompts as they are instead of re-applying the formatters."""
    eval_interval: int = 16
    """Evaluate every this many training steps, step 0 included (0 = never)."""
    eval_num_samples: int = 4
    """Evaluation items per evaluation."""
    eval_batch_size: int = 1
    rollout_buffer_size: int = 2
    """Node samples per agent collected before an update."""
    train_batch_size: int | None = None
    """Nodes per optimizer step; ``None`` means ``rollout_buffer_size``."""
    advantage_normalization: bool = True
    """z-normalise advantages within each node's sibling group."""
    advantage_mode: str = "mean"
    """Baseline among siblings: ``mean`` (MAGRPO), ``raw`` (REINFORCE), ``max`` (ReMax), ``rloo``."""
    reference_kl_enabled: bool = False
    reference_kl_coef: float = 0.1
    reference_devices: str | list[str] | None = None

    # --- CoopLab extras ----------------------------------------------------------------------
    turn_order: str = "simultaneous"
    """``sequential``: within a turn agent i's prompt also shows the replies of agents < i."""
    loss_type: str = "seq_sum"
    """``seq_sum``: -A * sum of token log-probs (CoMLRL); ``token_mean``: averaged over completion tokens."""
    clip_epsilon: float | None = None
    """PPO-style ratio clipping against the rollout policy; ``None`` = plain policy gradient."""
    num_inner_epochs: int = 1
    """Updates over the same rollouts; > 1 needs ``clip_epsilon``."""
    reference_kl_mode: str = "reward"
    """``reward``: subtract coef * k3 KL from the returns (CoMLRL); ``loss``: add coef * k3 KL to the loss."""
    max_grad_norm: float | None = 1.0
    """Clip each agent's gradient norm to this (``None`` = no clipping, as CoMLRL)."""
    weight_decay: float = 0.01
    lr_scheduler: str = "constant"
    """``constant``, ``linear`` (decay to 0) or ``cosine``, after ``warmup_steps`` of linear warmup."""
    warmup_steps: int = 0
    gradient_checkpointing: bool = False
    seed: int = 0
    """Seeds Python, NumPy and torch; a seeded CPU run reproduces exactly."""
    shuffle: bool = False
    """Shuffle the training set each epoch (seeded). CoMLRL never shuffles."""
    per_agent_normalization: bool = False
    """After the per-node baseline, z-normalise each agent's advantages over its whole update batch."""
    items_per_step: int = 1
    """Dataset items rolled out together (one batched generation per agent and turn)."""
    fast_decode: bool = True
    """Sample Llama-family models (Llama, Qwen2, SmolLM2) with the lean decoder's fast token step
    (``engine.fast_decode``: the same logits bit for bit, about half the CPU per token on small
    models). False runs every token through the model's own forward; other models always do."""
    micro_batch_size: int | None = None
    """Sequences per training forward pass; ``None`` = one forward per mini-batch."""
    max_steps: int | None = None
    """Train exactly this many steps, cycling through the data as needed (overrides ``num_train_epochs``)."""
    eval_greedy: bool = False
    """Greedy decoding in evaluation (CoMLRL samples with the training settings)."""
    eval_samples_per_item: int = 1
    """Completions per agent per eval item; > 1 enables pass@k for tasks with a ``check``."""
    checkpoint_interval: int = 0
    """Checkpoint every this many steps (0 = only when training ends or is stopped)."""
    checkpoint_total_limit: int | None = 3
    """Keep at most this many checkpoints (oldest removed first)."""
    transcripts_per_step: int = 2
    """Sampled episodes (tree branches) reported to the sink per step."""
    model_config: dict[str, Any] | None = None
    """CoMLRL's model settings: ``torch_dtype``/``dtype``, ``model_kwargs``, ``special_tokens``."""
    agent_names: list[str] | None = None
    """Names used in metric keys and transcripts; default ``agent_0``, ``agent_1``, ..."""

    # the advantage mode a preset forces (MAREINFORCE etc.); None for MAGRPO
    _forced_mode: str | None = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self._forced_mode is not None:
            self.advantage_mode = self._forced_mode
        _positive_int(self, "num_train_epochs", "logging_steps", "num_agents", "max_new_tokens", "num_turns",
                      "eval_batch_size", "rollout_buffer_size", "num_inner_epochs", "items_per_step",
                      "eval_samples_per_item")
        _non_negative_int(self, "eval_interval", "eval_num_samples", "warmup_steps", "checkpoint_interval",
                          "transcripts_per_step")
        _optional_positive_int(self, "train_batch_size", "micro_batch_size", "max_steps", "checkpoint_total_limit")
        if self.num_generations < 2:
            _fail("num_generations", f"must be >= 2 (the group baseline needs siblings), got {self.num_generations}")
        if self.top_k is not None and self.top_k < 0:
            _fail("top_k", f"must be >= 0 or None, got {self.top_k}")
        for name in ("agent_learning_rate", "temperature"):
            if not getattr(self, name) > 0:
                _fail(name, f"must be > 0, got {getattr(self, name)}")
        if not 0 < self.top_p <= 1:
            _fail("top_p", f"must be in (0, 1], got {self.top_p}")
        if not 0 <= self.discount <= 1:
            _fail("discount", f"must be in [0, 1], got {self.discount}")
        if self.reference_kl_coef < 0 or self.weight_decay < 0:
            _fail("reference_kl_coef" if self.reference_kl_coef < 0 else "weight_decay", "must be >= 0")
        for name in ("clip_epsilon", "max_grad_norm"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                _fail(name, f"must be > 0 or None, got {value}")
        self.joint_mode = _choice(self, "joint_mode", _JOINT_MODE_ALIASES)
        self.parallel_training = _choice(self, "parallel_training", _PARALLEL_ALIASES)
        _one_of(self, "advantage_mode", ADVANTAGE_MODES)
        _one_of(self, "turn_order", ("simultaneous", "sequential"))
        _one_of(self, "loss_type", ("seq_sum", "token_mean"))
        _one_of(self, "reference_kl_mode", ("reward", "loss"))
        _one_of(self, "lr_scheduler", ("constant", "linear", "cosine"))
        if self.num_inner_epochs > 1 and self.clip_epsilon is None:
            _fail("num_inner_epochs", "> 1 reuses rollouts off-policy; set clip_epsilon (e.g. 0.2) as well")
        if self.parallel_training == "mp" and not self.agent_devices:
            _fail("agent_devices", "parallel_training='mp' needs agent_devices, e.g. ['cuda:0', 'cuda:1']")
        if self.turn_order == "sequential" and self.joint_mode == "cross":
            _fail("turn_order", "'sequential' works with joint_mode='aligned' only")
        if self.model_config is not None and not isinstance(self.model_config, dict):
            _fail("model_config", f"must be a dict, got {type(self.model_config).__name__}")
        if not isinstance(self.fast_decode, bool):
            _fail("fast_decode", f"must be True or False, got {self.fast_decode!r}")

    @property
    def effective_train_batch_size(self) -> int:
        """Nodes per optimizer step (CoMLRL: ``train_batch_size`` or ``rollout_buffer_size``)."""
        return self.train_batch_size or self.rollout_buffer_size

    def to_dict(self) -> dict[str, Any]:
        """Plain dict of every public field (for sinks, checkpoints and reports)."""
        data = asdict(self)
        data.pop("_forced_mode", None)
        return data

    @classmethod
    def field_names(cls) -> list[str]:
        """The public field names, in declaration order."""
        return [f.name for f in fields(cls) if not f.name.startswith("_")]


def _fail(name: str, message: str) -> None:
    raise ValueError(f"{name}: {message}")


def _positive_int(cfg: MAGRPOConfig, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            _fail(name, f"must be an integer >= 1, got {value!r}")


def _non_negative_int(cfg: MAGRPOConfig, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            _fail(name, f"must be an integer >= 0, got {value!r}")


def _optional_positive_int(cfg: MAGRPOConfig, *names: str) -> None:
    for name in names:
        if getattr(cfg, name) is not None:
            _positive_int(cfg, name)


def _choice(cfg: MAGRPOConfig, name: str, aliases: dict[str, str]) -> str:
    value = str(getattr(cfg, name)).lower()
    if value not in aliases:
        _fail(name, f"must be one of {sorted(set(aliases.values()))}, got {getattr(cfg, name)!r}")
    return aliases[value]


def _one_of(cfg: MAGRPOConfig, name: str, allowed: tuple[str, ...]) -> None:
    if getattr(cfg, name) not in allowed:
        _fail(name, f"must be one of {list(allowed)}, got {getattr(cfg, name)!r}")


@dataclass
class MAREINFORCEConfig(MAGRPOConfig):
    """MAGRPO with no baseline (``advantage_mode="raw"``), as CoMLRL's MAREINFORCE."""

    _forced_mode: str | None = field(default="raw", init=False, repr=False)


@dataclass
class MAReMaxConfig(MAGRPOConfig):
    """MAGRPO with the group maximum as baseline (``advantage_mode="max"``), as CoMLRL's MAReMax."""

    _forced_mode: str | None = field(default="max", init=False, repr=False)


@dataclass
class MARLOOConfig(MAGRPOConfig):
    """MAGRPO with the leave-one-out baseline (``advantage_mode="rloo"``), as CoMLRL's MARLOO."""

    _forced_mode: str | None = field(default="rloo", init=False, repr=False)
