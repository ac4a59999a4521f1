"""What every ``engine.comlrl`` trainer shares: CoMLRL's attributes over a CoopLab trainer.

A compatibility trainer checks its arguments as CoMLRL does (order and messages), builds the CoopLab
trainer of the same algorithm (``self._engine``) and shows it as CoMLRL shows its trainers:
``agents`` are the models, with ``optimizers``, ``tokenizers``, ``reference_models``, ``model_name``,
``wandb_initialized`` and ``verbose`` beside them; ``reward_func`` is the user's function, called
with CoMLRL's conventions (:class:`CoMLRLReward`). Every other attribute and method is the CoopLab
trainer's (``env_step``, ``args``, ``evaluate``, ``save_checkpoint``, ``state_dict``, ``sink`` ...),
and setting one of those sets it there.
"""

from __future__ import annotations

import inspect
import numbers
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, ClassVar

from engine.comlrl.utils.checkpoint import (
    read_checkpoint_metadata,
    record_checkpoint_identity,
    wandb_identity,
)
from engine.comlrl.utils.reward_utils import call_reward_function
from engine.comlrl.utils.wandb_utils import verbose_from_wandb_config, wandb_init_kwargs
from engine.sinks.wandb_sink import WandbSink

# attributes the compatibility trainer keeps itself (everything else is the CoopLab trainer's)
_OWN = frozenset({"_engine", "reward_func", "reward_processor", "train_dataset", "model_name", "wandb_config",
                  "verbose", "wandb_initialized", "model_config", "formatters", "run_id", "_epoch_checkpoints"})


class CoMLRLReward:
    """The user's reward function as CoopLab's team reward calls it (``f(*agent_completions,
    batch_items=..., prompts=...)`` once per joint action, ``prompts`` one list per agent), called the
    way CoMLRL calls it: :func:`engine.comlrl.utils.reward_utils.call_reward_function` with the first
    agent's prompt (CoMLRL's ``prompts=[formatted_prompt]``) and the joint action's dataset item."""

    def __init__(self, reward_func: Callable[..., Any] | None, num_agents: int) -> None:
        if reward_func is None:  # the trainers check it first (check_reward_func), in CoMLRL's order
            raise ValueError("reward_func must be a callable.")
        self.reward_func = reward_func
        self.num_agents = num_agents
        self.__qualname__ = getattr(reward_func, "__qualname__", type(reward_func).__name__)
        if hasattr(reward_func, "reward_range"):
            self.reward_range = reward_func.reward_range

    def __call__(self, *agent_completions: list[str], batch_items: list[dict] | None = None,
                 prompts: list[list[str]] | None = None) -> list[float]:
        first = list(prompts[0]) if prompts else []
        return call_reward_function(self.reward_func, first, [list(c) for c in agent_completions],
                                    num_agents=len(agent_completions), batch_items=batch_items)


def check_reward_func(reward_func: Any) -> None:
    """CoMLRL's first check of every trainer."""
    if reward_func is None or not callable(reward_func):
        raise ValueError("reward_func must be a callable.")


def check_tokenizers(tokenizer: Any, sources: Sequence[Any], *, agents_given: bool) -> None:
    """CoMLRL's tokenizer rules: model objects need a tokenizer; a list has one per agent."""
    if isinstance(tokenizer, list | tuple):
        if len(tokenizer) != len(sources):
            raise ValueError("tokenizers length must match agents.")
    elif tokenizer is None and agents_given and not all(isinstance(s, str) for s in sources):
        raise ValueError("Tokenizer(s) must be provided when agents are model objects.")


def check_devices(spec: Any, count: int, kind: str) -> None:
    """A device list has 1 or ``count`` entries (CoMLRL's ``DeviceScheduler.resolve_devices``)."""
    if spec is None or isinstance(spec, str):
        return
    if len(spec) == 0:
        raise ValueError(f"{kind} must be a non-empty list or 'auto'.")
    if len(spec) not in (1, count):
        raise ValueError(f"{kind} length ({len(spec)}) must be 1 or {count}.")


class CoMLRLWandbSink(WandbSink):
    """A W&B run opened when the trainer is built, as CoMLRL opens it (``wandb.init`` with
    :func:`engine.comlrl.utils.wandb_utils.wandb_init_kwargs`); training reports to that run and adds
    its config to the run's."""

    def __init__(self, wandb_config: dict[str, Any], run_config: dict[str, Any]) -> None:
        super().__init__()
        self.run = self.wandb.init(**wandb_init_kwargs(wandb_config, run_config))

    def start(self, total_steps: int | None, config: dict) -> None:
        if self.run is None:  # a finished run: the next train() opens a new one
            super().start(total_steps, config)
            return
        run_config = getattr(self.run, "config", None)
        if run_config is not None:
            run_config.update({**config, "total_steps": total_steps}, allow_val_change=True)


def _recorded_run_id(checkpoint: Any) -> str | None:
    """The run id a checkpoint records (None: none, or not a readable checkpoint; CoopLab's trainer then
    names what is wrong with it)."""
    if checkpoint is None:
        return None
    try:
        return read_checkpoint_metadata(checkpoint)["run_id"]
    except (OSError, ValueError):
        return None


class CompatTrainer:
    """Base of the ``engine.comlrl`` trainers (see the module docstring)."""

    algorithm_name: ClassVar[str] = ""
    run_id: str | None  # the training run's id (CoMLRL's), set at the first train()
    wandb_initialized: bool
    _epoch_checkpoints: bool

    def __new__(cls, *args: Any, **kwargs: Any) -> CompatTrainer:
        """Keeps the constructor's arguments: a ``train_dataset`` set later builds the trainer again
        with them (:meth:`_take_train_dataset`)."""
        self = super().__new__(cls)
        vars(self)["_construction"] = (args, kwargs)
        return self

    def _adopt(self, engine: Any, *, reward_func: Any, reward_processor: Any, train_dataset: Any,
               model_name: str | None, wandb_config: dict[str, Any] | None,
               model_config: dict[str, Any] | None, formatters: Any) -> None:
        """Keep the CoopLab trainer and CoMLRL's own attributes; open the W&B run now when
        ``wandb_config`` is given (CoMLRL's trainers do; the CoopLab trainer is built without it)."""
        vars(self).update(_engine=engine, reward_func=reward_func,
                          reward_processor=reward_processor if reward_processor is not None else (lambda x: x),
                          train_dataset=train_dataset, model_name=model_name, wandb_config=wandb_config,
                          model_config=dict(model_config or {}), formatters=formatters,
                          verbose=verbose_from_wandb_config(wandb_config), wandb_initialized=False, run_id=None,
                          _epoch_checkpoints=False)
        vars(engine)["save_checkpoint"] = self._save_checkpoint  # training checkpoints carry CoMLRL's identity
        if wandb_config is not None and engine.sink is None:
            engine.sink = CoMLRLWandbSink(wandb_config, {"algorithm": self.algorithm_name, **engine.args.to_dict()})
            self.wandb_initialized = True

    # -- attributes: CoMLRL's names, CoopLab's objects ---------------------------------------------
    def __getattr__(self, name: str) -> Any:
        engine = vars(self).get("_engine")
        if engine is None or name.startswith("__"):
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(engine, name)

    def __setattr__(self, name: str, value: Any) -> None:
        engine = vars(self).get("_engine")
        if name in _OWN or name in vars(self) or engine is None \
                or isinstance(getattr(type(self), name, None), property) or not hasattr(engine, name):
            object.__setattr__(self, name, value)
        else:
            setattr(engine, name, value)

    @property
    def agents(self) -> list[Any]:
        """The agents' models (CoMLRL's ``trainer.agents``; the same object where agents share one)."""
        return [agent.model for agent in self._engine.agents]

    @property
    def optimizers(self) -> list[Any]:
        return [agent.optimizer for agent in self._engine.agents]

    @property
    def tokenizers(self) -> list[Any]:
        return [agent.tokenizer for agent in self._engine.agents]

    @property
    def tokenizer(self) -> Any:
        return self._engine.agents[0].tokenizer

    @property
    def reference_models(self) -> list[Any]:
        """The frozen reference models (reference KL); empty when it is off."""
        return [agent.reference_model for agent in self._engine.agents if agent.reference_model is not None]

    @property
    def agent_devices(self) -> list[Any]:
        return [agent.device for agent in self._engine.agents]

    @property
    def device(self) -> Any:
        return self._engine.agents[0].device

    # -- CoMLRL's methods ----------------------------------------------------------------------------
    def _save_checkpoint(self, path: str | Path) -> Path:
        """CoopLab's checkpoint plus CoMLRL's identity fields (:func:`record_checkpoint_identity`): this
        class, the training run's id and the W&B run the trainer reports to. Every checkpoint the
        CoopLab trainer writes goes through here. In a :meth:`train` with a ``checkpoint_dir`` the
        folder is CoMLRL's ``checkpoint-<epoch>`` (iteration, for the iterative trainers), and
        ``checkpoint-<epoch>-step-<step>`` for a run that ends between two."""
        engine = self._engine
        path, sequence = Path(path), None
        if self._epoch_checkpoints:
            sequence, rest = divmod(engine.step, self._sequence_steps())
            path = path.with_name(f"checkpoint-{sequence}" if rest == 0 else f"checkpoint-{sequence}-step-{engine.step}")
            sequence = sequence if rest == 0 else None
        folder = Path(type(engine).save_checkpoint(engine, path))
        sink = engine.sink
        record_checkpoint_identity(folder, trainer_class=f"{type(self).__module__}.{type(self).__qualname__}",
                                   run_id=self.run_id, sequence=sequence,
                                   wandb=wandb_identity(sink.run) if isinstance(sink, WandbSink) else None)
        return folder

    def _sequence_steps(self) -> int:
        """Steps of one CoMLRL checkpoint sequence: an iteration (iterative trainers) or an epoch."""
        engine = self._engine
        return max(1, int(getattr(engine, "steps_per_iteration", None) or engine.steps_per_epoch or 1))

    def save_checkpoint(self, path: str | Path) -> Path:
        return self._save_checkpoint(path)

    def train(self, resume_from_checkpoint: Any = None, checkpoint_dir: Any = None, checkpoint_interval: Any = None,
              checkpoint_total_limit: Any = None, **kwargs: Any) -> Any:
        """Train (CoopLab's ``train()``); CoMLRL's error when no ``train_dataset`` was given."""
        if self.train_dataset is None:
            raise ValueError("Trainer: training requires a train_dataset.")
        if self.train_dataset is not self._engine.train_dataset:
            self._take_train_dataset()
        if self.run_id is None:  # CoMLRL's run id: a resumed run keeps its checkpoint's
            self.run_id = _recorded_run_id(resume_from_checkpoint) or uuid.uuid4().hex
        engine = self._engine
        if checkpoint_dir is None:  # CoMLRL writes no checkpoint; CoopLab's output_dir option may
            return engine.train(resume_from_checkpoint, None, checkpoint_interval, checkpoint_total_limit, **kwargs)
        every = 1 if checkpoint_interval is None else checkpoint_interval
        if isinstance(every, bool) or not isinstance(every, numbers.Integral) or every < 1:
            raise ValueError("checkpoint_interval must be a positive integer.")
        return self._train_by_epochs(int(every), resume_from_checkpoint, checkpoint_dir,
                                     0 if checkpoint_total_limit is None else checkpoint_total_limit, **kwargs)

    def _take_train_dataset(self) -> None:
        """``trainer.train_dataset = ds`` after construction, as CoMLRL allows: CoopLab's trainers size
        their step schedule (and MADPO/MARLHF their pair collection) from the dataset when they are
        built, so the trainer is built again from the constructor's arguments with ``ds``, as if it had
        been passed there (the same model objects; model ids load again; the same W&B run). Refused
        once the trainer has trained or loaded a checkpoint."""
        engine = self._engine
        if engine.step or engine.env_step or engine.last_checkpoint is not None or getattr(engine, "collected_items", 0):
            raise ValueError("train_dataset: set after this trainer trained; build a new trainer with it "
                             "(train_dataset=... in the constructor)")
        args, kwargs = vars(self)["_construction"]
        bound = inspect.signature(type(self).__init__).bind(self, *args, **kwargs)
        bound.arguments["train_dataset"] = self.train_dataset
        extras = next((p.name for p in inspect.signature(type(self).__init__).parameters.values()
                       if p.kind is inspect.Parameter.VAR_KEYWORD), None)
        if extras is not None and engine.sink is not None:  # the run reports where it did (no second W&B run)
            bound.arguments.setdefault(extras, {}).setdefault("sink", engine.sink)
        opened = self.wandb_initialized
        type(self).__init__(*bound.args, **bound.kwargs)
        self.wandb_initialized = opened

    def _train_by_epochs(self, every: int, resume_from_checkpoint: Any, checkpoint_dir: Any, limit: int,
                         **kwargs: Any) -> Any:
        """CoMLRL's checkpoints: every ``every`` epochs (iterations), all kept unless ``limit`` (0: all).
        The CoopLab trainer checkpoints every N steps, so N is set from its steps per epoch, and once
        more after a MADPO/MARLHF pair collection, which decides them."""
        engine = self._engine
        args = engine.args
        saved = args.checkpoint_interval

        def schedule() -> None:
            args.checkpoint_interval = every * self._sequence_steps()

        collect = getattr(type(engine), "collect_pairs", None)
        if collect is not None:
            def collect_pairs(*a: Any, **k: Any) -> Any:
                pairs = collect(engine, *a, **k)
                schedule()
                return pairs

            vars(engine)["collect_pairs"] = collect_pairs
        schedule()
        self._epoch_checkpoints = True
        try:
            return engine.train(resume_from_checkpoint, checkpoint_dir, None, limit, **kwargs)
        finally:
            self._epoch_checkpoints = False
            vars(engine).pop("collect_pairs", None)
            args.checkpoint_interval = saved
