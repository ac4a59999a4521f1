"""Which project files one MAGRPO step passes through, from ``train()`` to the first ``optimizer.step()``.

Runs a tiny MAGRPO training (two tiny agents built from a config, offline, one step) under
``sys.setprofile`` and records every project file (under ``engine/``, ``cooplab/`` or ``jobs/``) in
which a Python function is entered between entering the trainer's ``train()`` and the first call of a
torch optimizer's ``step()``. Module bodies run by a first import are not counted (everything the step
needs is imported before ``train()`` starts). Prints the count, then the files in the order first entered.

    .venv/bin/python scripts/step_path_files.py            # the count and the list
    .venv/bin/python scripts/step_path_files.py --functions  # and each file's functions entered

This is the measure docs/architecture.md's "reading the code" path is kept short by.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PROJECT_DIRS = tuple(str(ROOT / name) + os.sep for name in ("engine", "cooplab", "jobs"))


def _build_trainer():
    """Two tiny agents of different architectures and a one-step, one-turn MAGRPO config."""
    from engine import MAGRPOConfig, MAGRPOTrainer
    from engine.models.tiny import build_tiny_model

    m1, t1 = build_tiny_model("llama", "xs", seed=0)
    m2, t2 = build_tiny_model("qwen2", "xs", seed=1)
    config = MAGRPOConfig(num_turns=1, num_generations=2, max_new_tokens=6, num_train_epochs=1, logging_steps=1,
                          agent_learning_rate=1e-3, eval_interval=0, max_steps=1, seed=0)

    def reward(completions1, completions2):
        return [len(completions2[0]) / 10.0 - abs(len(completions1[0]) - 5) / 10.0]

    data = [{"prompt": f"Count to {i}:"} for i in range(4)]
    return MAGRPOTrainer(agents=[m1, m2], tokenizer=[t1, t2], args=config, train_dataset=data, reward_func=reward)


class StepPath:
    """A profile function: the project files entered from ``train()`` to the first optimizer step."""

    def __init__(self) -> None:
        import torch

        self._optimizer_type = torch.optim.Optimizer
        self.started = False
        self.finished = False
        self.files: dict[str, list[str]] = {}  # file -> functions entered, both in first-entered order

    def __call__(self, frame, event, arg) -> None:
        if event != "call" or self.finished:
            return
        code = frame.f_code
        if not self.started:
            self.started = code.co_name == "train" and code.co_filename.startswith(PROJECT_DIRS)
        if not self.started:
            return
        if code.co_name == "step" and isinstance(frame.f_locals.get("self"), self._optimizer_type):
            self.finished = True
            return
        if code.co_name != "<module>" and code.co_filename.startswith(PROJECT_DIRS):
            functions = self.files.setdefault(os.path.relpath(code.co_filename, ROOT), [])
            if code.co_qualname not in functions:
                functions.append(code.co_qualname)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--functions", action="store_true", help="also list each file's functions entered")
    args = parser.parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    sys.path.insert(0, str(ROOT))
    import torch

    torch.set_num_threads(1)
    trainer = _build_trainer()
    tracer = StepPath()
    sys.setprofile(tracer)
    try:
        trainer.train()
    finally:
        sys.setprofile(None)
    if not tracer.finished:
        print("no optimizer step was reached", file=sys.stderr)
        return 1
    print(f"{len(tracer.files)} files from train() to optimizer.step():")
    for path, functions in tracer.files.items():
        print(f"  {path}")
        if args.functions:
            for name in functions:
                print(f"      {name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
