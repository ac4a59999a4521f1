"""CoMLRL 1.4.3 on the benchmark workload (an optional extra, never a runtime dependency)."""

from __future__ import annotations

from typing import Any

from bench.training import workload
from bench.training.workload import Workload

COMLRL_INSTALL = "pip install --no-deps comlrl==1.4.3 && pip install wandb openai"


class ComlrlMissingError(ImportError):
    """CoMLRL is not installed; the message says how to install it for the benchmark."""


def import_comlrl() -> Any:
    """CoMLRL's MAGRPO classes, or ComlrlMissingError with the install command."""
    try:
        from comlrl.trainers.reinforce import MAGRPOConfig, MAGRPOTrainer
    except ImportError as exc:
        raise ComlrlMissingError(
            f"--vs-comlrl needs CoMLRL 1.4.3 (a benchmark-only extra, never a runtime dependency): "
            f"{COMLRL_INSTALL}  [{exc}]"
        ) from exc
    return MAGRPOConfig, MAGRPOTrainer


def run_comlrl(w: Workload) -> dict[str, Any]:
    """CoMLRL 1.4.3's MAGRPOTrainer on the same models, data, K and lengths."""
    config_cls, trainer_cls = import_comlrl()
    from datasets import Dataset

    models, tokenizers = workload.setup_agents(w)
    config = config_cls(
        num_train_epochs=1, agent_learning_rate=w.learning_rate, num_generations=w.num_generations,
        max_new_tokens=w.max_new_tokens, temperature=w.temperature, top_p=w.top_p, top_k=w.top_k, num_turns=1,
        rollout_buffer_size=w.items_per_update, eval_interval=0, logging_steps=1,
    )  # fmt: skip
    trainer = trainer_cls(
        agents=models, tokenizer=tokenizers, train_dataset=Dataset.from_list(workload.dataset(w)),
        reward_func=workload.length_ratio_reward, formatters=workload.formatters(w.num_agents), args=config,
        wandb_config=None,
    )  # fmt: skip
    trainer.verbose = False
    # a step ends when the update after every `items_per_update`-th item has run
    marks = [workload.clock()]
    original = trainer._train_step_returns
    done = {"items": 0}

    def timed_item(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        done["items"] += 1
        if done["items"] % w.items_per_update == 0:
            marks.append(workload.clock())
        return result

    trainer._train_step_returns = timed_item
    trainer.train()
    return {**workload.summarize(marks, w), "peak_mem_mb": workload.peak_memory_mb()}
