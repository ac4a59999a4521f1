"""CoMLRL 1.4.3's trainers on the learning guard's workloads (:mod:`bench.training.guard_workloads`), measured
the same way as CoopLab's.

The same seeded models, prompts, reward, formatters and settings (CoMLRL's field names); CoMLRL has
no seed setting, so Python's, numpy's and torch's global RNGs are seeded with the guard's seed before
the trainer is built. Where CoMLRL needs a model that CoopLab copies from the agents by default, it
gets the same copy: IAC's critics (one per agent) and MAAC's shared critic are copies of the agents'
initial weights (CoopLab's default critics), and MARLHF's reward model is read from a folder holding
agent 0's initial weights (CoMLRL takes only a name there; CoopLab copies agent 0). The iterative
trainers' replay shards go to a temporary folder (CoMLRL writes them to ./preference_replay). CoMLRL is an
optional benchmark extra (:data:`bench.training.vs_comlrl.COMLRL_INSTALL`), never a dependency.
"""

from __future__ import annotations

import copy
import tempfile
import time
from pathlib import Path
from typing import Any

from bench.training.guard_workloads import (
    FAMILIES,
    SAMPLING,
    Family,
    Result,
    formatters,
    measure,
    one_thread,
    seed_globals,
    team_reward,
    tiny_team,
    train_dataset,
)

# family -> CoMLRL's (module, config class, trainer class)
COMLRL_CLASSES: dict[str, tuple[str, str, str]] = {
    "magrpo": ("comlrl.trainers.reinforce", "MAGRPOConfig", "MAGRPOTrainer"),
    "grpo": ("comlrl.trainers.reinforce", "MAGRPOConfig", "MAGRPOTrainer"),
    "mareinforce": ("comlrl.trainers.reinforce", "MAREINFORCEConfig", "MAREINFORCETrainer"),
    "maremax": ("comlrl.trainers.reinforce", "MAReMaxConfig", "MAReMaxTrainer"),
    "marloo": ("comlrl.trainers.reinforce", "MARLOOConfig", "MARLOOTrainer"),
    "centralized_magrpo": ("comlrl.trainers.reinforce", "CentralizedMAGRPOConfig", "CentralizedMAGRPOTrainer"),
    "iac": ("comlrl.trainers.actor_critic", "IACConfig", "IACTrainer"),
    "maac": ("comlrl.trainers.actor_critic", "MAACConfig", "MAACTrainer"),
    "madpo": ("comlrl.trainers.preference.madpo", "MADPOConfig", "MADPOTrainer"),
    "madpo_iter": ("comlrl.trainers.preference.iterative", "MADPOIterConfig", "MADPOIterTrainer"),
    "marlhf": ("comlrl.trainers.preference.marlhf", "MARLHFConfig", "MARLHFTrainer"),
    "marlhf_iter": ("comlrl.trainers.preference.iterative", "MARLHFIterConfig", "MARLHFIterTrainer"),
}


def comlrl_classes(name: str) -> tuple[type, type]:
    """CoMLRL's config and trainer classes of family ``name``; ComlrlMissingError (with the install
    command) when CoMLRL is not installed."""
    import importlib

    from bench.training.vs_comlrl import import_comlrl

    import_comlrl()
    module, config, trainer = COMLRL_CLASSES[name]
    loaded = importlib.import_module(module)
    return getattr(loaded, config), getattr(loaded, trainer)


def comlrl_trainer(family: Family, models: list[Any], tokenizer: Any, folder: Path) -> Any:
    """CoMLRL's trainer of ``family`` on the workload (``folder``: where a reward model's weights are saved)."""
    from datasets import Dataset

    config_cls, trainer_cls = comlrl_classes(family.name)
    settings = {**SAMPLING, **family.settings}
    kwargs: dict[str, Any] = dict(tokenizer=tokenizer, train_dataset=Dataset.from_list(train_dataset()),
                                  reward_func=team_reward, formatters=formatters(family.roles), wandb_config=None)
    if family.centralized:
        from engine.preference.centralized import EqualPartsCentralizedAdapter

        settings["max_new_tokens"] = family.max_new_tokens
        kwargs.update(num_agents=family.roles, centralized_adapter=EqualPartsCentralizedAdapter())
    elif family.models == 1:
        kwargs["num_agents"] = 1
    if family.name == "iac":
        kwargs["critics"] = [copy.deepcopy(m) for m in models]
    elif family.name == "maac":
        kwargs["critics"] = [copy.deepcopy(models[0])]
    elif family.name in ("marlhf", "marlhf_iter"):
        models[0].save_pretrained(folder / "reward_model")
        tokenizer.save_pretrained(folder / "reward_model")
        settings["reward_model_name"] = str(folder / "reward_model")
    if family.name in ("madpo_iter", "marlhf_iter"):
        settings["preference_replay_dir"] = str(folder / "replay")  # CoMLRL's default: ./preference_replay
    trainer = trainer_cls(agents=models, args=config_cls(**settings), **kwargs)
    trainer.verbose = False
    return trainer


def run_comlrl(name: str, seed: int) -> Result:
    """Build ``name``'s team, measure, train with CoMLRL 1.4.3, measure again (one torch thread)."""
    family = FAMILIES[name]
    comlrl_classes(name)  # fail before any work when CoMLRL is missing
    with one_thread(), tempfile.TemporaryDirectory() as tmp:
        started = time.process_time()
        models, tokenizer = tiny_team(family, seed)
        before = measure(family, models, tokenizer)
        seed_globals(seed)
        trainer = comlrl_trainer(family, models, tokenizer, Path(tmp))
        trainer.train()
        after = measure(family, models, tokenizer)
        return Result(name, seed, before, after, time.process_time() - started, side="comlrl")
