"""Same training before and after a change: per-step metrics, transcripts and final-weight hashes of
every example run config, the CoMLRL constructor paths and a two-trainer system, from one tree.

Run it once per tree with that tree first on ``PYTHONPATH`` (the script file itself, not ``-m``, so
the ``engine`` it trains is the tree's), then compare the two record folders::

    git worktree add /tmp/before <commit>
    PYTHONPATH=/tmp/before .venv/bin/python bench/training/same_training.py record /tmp/same/before
    PYTHONPATH=$PWD        .venv/bin/python bench/training/same_training.py record /tmp/same/after
    .venv/bin/python bench/training/same_training.py compare /tmp/same/before /tmp/same/after

Each scenario trains a couple of steps on tiny models (``builtin:tiny-llama``, tiny Llama/Qwen2 folders;
the HumanEval example's SmolLM2-135M agents on the CPU in float32) in a fresh process on one torch
thread, and writes ``<scenario>.json``: the metrics every step reported (wall-clock and memory keys left
out, named under ``dropped_keys``), the transcripts' turns, and a sha256 per final weight tensor (the
run's exported ``model/`` folder, or a CoMLRL trainer's ``save_model`` folder). ``compare`` prints one row
per scenario: metrics identical, weights identical (else the largest absolute difference, from the
tensors kept beside the records; "same tensors under other names" when only a save layout's file or key
names changed). ``record --only a,b`` runs some scenarios. docs/testing.md says when
to run it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

EXAMPLE_OVERRIDES: dict[str, dict[str, Any]] = {
    # a couple of steps each; evaluation and a checkpoint inside the run so their metrics are compared too
    "quickstart": {"max_steps": 2, "eval_interval": 2, "eval_num_samples": 2, "checkpoint_interval": 2},
    "shared-sequential": {"max_steps": 2, "eval_interval": 2, "eval_num_samples": 2},
    "centralized_magrpo": {"max_steps": 2, "num_generations": 4, "max_new_tokens": 16, "eval_interval": 2,
                           "eval_num_samples": 2, "checkpoint_interval": 2},
    "centralized_madpo": {"max_steps": 2, "preference_num_candidates": 4, "preference_pairs_per_sample": 2,
                          "max_new_tokens": 16, "eval_interval": 2, "eval_num_samples": 2, "checkpoint_interval": 2},
    "madpo": {"max_steps": 2, "preference_num_candidates": 4, "preference_pairs_per_sample": 2,
              "eval_interval": 2, "eval_num_samples": 2, "checkpoint_interval": 2},
    "madpo_iter": {"num_iterations": 2, "max_steps": 2, "preference_num_candidates": 4,
                   "preference_pairs_per_sample": 2, "eval_interval": 2, "eval_num_samples": 2,
                   "checkpoint_interval": 2},
    "marlhf": {"max_steps": 2, "num_generations": 4, "preference_num_candidates": 4,
               "preference_pairs_per_sample": 4, "reward_num_train_epochs": 1, "eval_interval": 2,
               "eval_num_samples": 2, "checkpoint_interval": 2},
    "marlhf_iter": {"num_iterations": 2, "max_steps": 2, "num_generations": 4, "preference_num_candidates": 4,
                    "preference_pairs_per_sample": 2, "reward_num_train_epochs": 1, "eval_interval": 2,
                    "eval_num_samples": 2, "checkpoint_interval": 2},
    "iac": {"max_steps": 2, "eval_interval": 2, "rollout_buffer_size": 4},
    "maac": {"max_steps": 2, "eval_interval": 2, "rollout_buffer_size": 4},
    "humaneval-smollm2": {"max_steps": 1, "num_generations": 2, "max_new_tokens": 16, "rollout_buffer_size": 2,
                          "eval_interval": 0, "device": "cpu", "torch_dtype": "float32"},
    "system_alternating": {"eval_interval": 2},
}
EXAMPLE_EXTRA: dict[str, dict[str, Any]] = {
    "humaneval-smollm2": {"task": {"name": "humaneval", "params": {"train_slice": "0:2", "eval_slice": "133:134"}}},
    "system_alternating": {"system": {"rounds": 4, "items_per_round": 2}},
}
COMLRL = ("comlrl_magrpo", "comlrl_magrpo_2turn", "comlrl_magrpo_cross", "comlrl_magrpo_sequential",
          "comlrl_magrpo_per_agent", "comlrl_mareinforce", "comlrl_maremax", "comlrl_marloo",
          "comlrl_coordinator", "comlrl_iac", "comlrl_maac", "comlrl_madpo")
UNSTABLE = re.compile(r"(_s|_seconds|per_s|_gib|_mib|_bytes|_mb)$|seconds|memory|/time|wall")


# --- one scenario, in its own process -------------------------------------------------------------------

def _stable(metrics: dict[str, Any], dropped: set[str]) -> dict[str, Any]:
    out = {}
    for key, value in sorted(metrics.items()):
        if UNSTABLE.search(key):
            dropped.add(key)
        else:
            out[key] = repr(value) if isinstance(value, float) and not math.isfinite(value) else value
    return out


def _tensor_files(folder: Path) -> dict[str, Any]:
    """Every tensor of the weight files under ``folder``, keyed ``relative/path::name``."""
    import torch
    from safetensors.torch import load_file

    tensors: dict[str, Any] = {}
    for path in sorted(folder.rglob("*")):
        rel = path.relative_to(folder).as_posix()
        if path.suffix == ".safetensors":
            loaded = load_file(str(path))
        elif path.suffix in (".pt", ".bin"):
            loaded = torch.load(path, map_location="cpu", weights_only=True)
            if not isinstance(loaded, dict):
                continue
        else:
            continue
        tensors.update({f"{rel}::{k}": v for k, v in loaded.items() if isinstance(v, torch.Tensor)})
    return tensors


def _digest(tensor: Any) -> str:
    t = tensor.detach().cpu().contiguous()
    head = f"{t.dtype}{tuple(t.shape)}".encode()
    return hashlib.sha256(head + t.view(-1).view(dtype=__import__("torch").uint8).numpy().tobytes()).hexdigest()


def _example(name: str, out: Path, sink: Any) -> Path:
    from engine.build.run import run_training
    from engine.examples import example_path
    from engine.schema.run_config import parse_run_config
    from engine.schema.safe_yaml import load_yaml_file

    data = load_yaml_file(example_path(name))
    data["trainer"] = {**data.get("trainer", {}), **EXAMPLE_OVERRIDES[name]}
    for key, value in EXAMPLE_EXTRA.get(name, {}).items():
        data[key] = {**(data.get(key) or {}), **value}
    config = parse_run_config(data)
    run_training(config, output_dir=out / "run", sink=sink)
    return out / "run" / "model"


def _tiny_folders(root: Path) -> list[str]:
    from engine.models.tiny import build_tiny_model

    dirs = []
    for arch, seed in (("llama", 0), ("qwen2", 1)):
        model, tok = build_tiny_model(arch, "xs", seed=seed)
        model.save_pretrained(root / arch)
        tok.save_pretrained(root / arch)
        dirs.append(str(root / arch))
    return dirs


def _tokenizers(folders: list[str]) -> list[Any]:
    from transformers import AutoTokenizer

    return [AutoTokenizer.from_pretrained(f) for f in folders]


def _length_reward(completions1: list[str], completions2: list[str]) -> list[float]:
    out = []
    for a, b in zip(completions1, completions2, strict=True):
        ratio = len(b) / max(len(a), 1)
        out.append(1.0 if 2 <= ratio <= 3 else math.exp(-min(abs(ratio - 2), abs(ratio - 3))))
    return out


def _transition(*, prompt: str, agent_completions: list[str], num_agents: int, **_: Any) -> list[str]:
    return [f"{prompt}\nYour last answer: {agent_completions[i]}\nImprove it." for i in range(num_agents)]


def _comlrl(name: str, out: Path, sink: Any) -> Path:
    """A trainer built as a CoMLRL 1.4.3 script builds it (engine.comlrl's imports), trained, then saved."""
    import torch
    from datasets import Dataset

    from engine.comlrl.trainers import actor_critic as ac
    from engine.comlrl.trainers import preference as pref
    from engine.comlrl.trainers import reinforce as rf
    from engine.comlrl.utils.reward_processor import RewardProcessors

    torch.manual_seed(0)
    models = _tiny_folders(out / "models")
    train = Dataset.from_list([{"prompt": f"Write a story about topic {i}."} for i in range(4)])
    evals = Dataset.from_list([{"prompt": "Write a story about the sea."}])
    fmt = [lambda ex, external_prompts=None: external_prompts or f"Summarise: {ex['prompt']}",
           lambda ex, external_prompts=None: external_prompts or f"Expand: {ex['prompt']}"]
    common: dict[str, Any] = dict(num_turns=1, num_train_epochs=1, agent_learning_rate=5e-4, max_new_tokens=8, logging_steps=1, eval_interval=2,
                  eval_num_samples=1, seed=0)
    kw: dict[str, Any] = dict(agents=models, train_dataset=train, eval_dataset=evals, reward_func=_length_reward,
                              formatters=fmt, sink=sink)
    family = {"comlrl_mareinforce": (rf.MAREINFORCETrainer, rf.MAREINFORCEConfig),
              "comlrl_maremax": (rf.MAReMaxTrainer, rf.MAReMaxConfig),
              "comlrl_marloo": (rf.MARLOOTrainer, rf.MARLOOConfig)}
    if name in family:
        cls, cfg_cls = family[name]
        trainer = cls(args=cfg_cls(num_generations=2, **common), **kw)
    elif name == "comlrl_iac":  # CoMLRL's actor-critic constructor: tokenizers with agents, a critic each
        trainer = ac.IACTrainer(args=ac.IACConfig(num_generations=2, rollout_buffer_size=2, **common),
                                tokenizer=_tokenizers(models), critics=models, **kw)
    elif name == "comlrl_maac":
        trainer = ac.MAACTrainer(args=ac.MAACConfig(num_generations=2, rollout_buffer_size=2, **common),
                                 tokenizer=_tokenizers(models), critic_model=models[0], **kw)
    elif name == "comlrl_madpo":
        cfg = pref.MADPOConfig(preference_num_candidates=4, preference_pairs_per_sample=2, train_batch_size=2,
                               **common)
        trainer = pref.MADPOTrainer(args=cfg, **kw)
    else:
        cfg_kw: dict[str, Any] = {**common, "num_generations": 2}
        extra: dict[str, Any] = {"reward_processor": RewardProcessors.scale(10)}
        if name == "comlrl_magrpo_2turn":
            cfg_kw.update(num_turns=2, joint_mode="aligned")
            extra["external_transition"] = _transition
        elif name == "comlrl_magrpo_cross":
            cfg_kw.update(num_turns=2, joint_mode="cross")
            extra["external_transition"] = _transition
        elif name == "comlrl_magrpo_sequential":
            cfg_kw.update(turn_order="sequential")
        elif name == "comlrl_magrpo_per_agent":
            extra.update(agent_names=["writer", "editor"], agent_learning_rates=[1e-3, None],
                         agent_generation=[{"temperature": 0.8, "max_new_tokens": 6}, None],
                         system_prompts=["You write.", None])
        trainer = rf.MAGRPOTrainer(args=rf.MAGRPOConfig(**cfg_kw), **kw, **extra)
    if name == "comlrl_coordinator":  # engine.systems' calls: rollout, credit (an outside reward), update
        items = [dict(train[i]) for i in range(4)]
        trainer.total_steps = 2
        for step in range(2):
            rollout = trainer.rollout(items[2 * step:2 * step + 2], [2 * step, 2 * step + 1], score=False)
            trainer.credit(rollout, [[1.0, 0.0], [0.5, 0.25]])
            sink.log_metrics(step, step, trainer.update([rollout], advance_step=True))
    else:
        trainer.train()
    trainer.save_model(str(out / "saved"))
    return out / "saved"


def run_scenario(name: str, out: Path) -> None:
    import torch

    from engine.sinks.memory import MemorySink

    torch.set_num_threads(1)
    out.mkdir(parents=True, exist_ok=True)
    sink = MemorySink()
    started = time.process_time()
    weights_dir = _comlrl(name, out, sink) if name in COMLRL else _example(name, out, sink)
    dropped: set[str] = set()
    metrics = [{"step": s, "env_step": e, "metrics": _stable(m, dropped)} for s, e, m in sink.metrics]
    turns = [[s, [dataclasses.asdict(t) for ep in eps for t in ep.turns]] for s, eps in sink.transcripts]
    tensors = _tensor_files(weights_dir)
    torch.save(tensors, out / "weights.pt")
    import engine

    record = {"scenario": name, "engine": str(Path(engine.__file__).parent), "metrics": metrics,
              "transcripts": turns, "finished": sink.finished, "dropped_keys": sorted(dropped),
              "weights": {k: _digest(v) for k, v in sorted(tensors.items())},
              "cpu_s": round(time.process_time() - started, 1)}
    (out / "record.json").write_text(json.dumps(record, indent=1, sort_keys=True, default=repr))


# --- the two commands ----------------------------------------------------------------------------------

def record(folder: Path, only: list[str] | None) -> int:
    names = only or [*EXAMPLE_OVERRIDES, *COMLRL]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    failed = 0
    for name in names:
        started = time.time()
        proc = subprocess.run([sys.executable, __file__, "scenario", name, str(folder / name)], env=env,
                              capture_output=True, text=True)
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / "log.txt").write_text(proc.stdout + proc.stderr)
        status = "ok" if proc.returncode == 0 else f"FAILED (exit {proc.returncode}, see {folder / name}/log.txt)"
        failed += proc.returncode != 0
        print(f"{name}: {status} in {time.time() - started:.0f} s", flush=True)
    return 1 if failed else 0


def _max_diff(a: Path, b: Path) -> str:
    import torch

    ta, tb = torch.load(a / "weights.pt", weights_only=True), torch.load(b / "weights.pt", weights_only=True)
    if set(ta) != set(tb):
        only_a, only_b = sorted(set(ta) - set(tb)), sorted(set(tb) - set(ta))
        return f"tensor names differ ({len(only_a)} only before, e.g. {only_a[:2]}; {len(only_b)} only after, " \
               f"e.g. {only_b[:2]})"
    worst = max((float((ta[k].double() - tb[k].double()).abs().max()) if ta[k].numel() else 0.0, k) for k in ta)
    return f"max |diff| {worst[0]:.3g} ({worst[1]})"


def _first_metric_difference(ma: list[dict], mb: list[dict]) -> str:
    if len(ma) != len(mb):
        return f"{len(ma)} vs {len(mb)} metric reports"
    for ra, rb in zip(ma, mb, strict=True):
        if ra != rb:
            keys = sorted(set(ra["metrics"]) ^ set(rb["metrics"]))
            if keys:
                return f"step {ra['step']}: keys only on one side {keys[:4]}"
            diff = [k for k in ra["metrics"] if ra["metrics"][k] != rb["metrics"][k]]
            k = diff[0] if diff else "step/env_step"
            return f"step {ra['step']}: {len(diff)} keys differ, e.g. {k} {ra['metrics'].get(k)} vs {rb['metrics'].get(k)}"
    return ""


def compare(before: Path, after: Path) -> int:
    print("| scenario | metrics identical? | transcripts identical? | weights identical? |")
    print("|---|---|---|---|")
    bad = 0
    for folder in sorted(p for p in before.iterdir() if (p / "record.json").is_file()):
        other = after / folder.name
        if not (other / "record.json").is_file():
            print(f"| {folder.name} | no record after | | |")
            bad += 1
            continue
        a, b = (json.loads((f / "record.json").read_text()) for f in (folder, other))
        metrics = "yes" if a["metrics"] == b["metrics"] else "no: " + _first_metric_difference(a["metrics"], b["metrics"])
        transcripts = "yes" if a["transcripts"] == b["transcripts"] else "no"
        if a["weights"] == b["weights"] and a["weights"]:
            weights = f"yes ({len(a['weights'])} tensors)"
        elif a["weights"] and sorted(a["weights"].values()) == sorted(b["weights"].values()):
            weights = f"same {len(a['weights'])} tensors (dtype, shape, bytes) under other file or key names"
        else:
            weights = "no: " + _max_diff(folder, other)
        bad += not (metrics == "yes" and transcripts == "yes" and weights.startswith(("yes", "same")))
        print(f"| {folder.name} | {metrics} | {transcripts} | {weights} |")
    return 1 if bad else 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["scenario"]:
        run_scenario(argv[1], Path(argv[2]))
        return 0
    if argv[:1] == ["record"]:
        only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else None
        return record(Path(argv[1]), only)
    if argv[:1] == ["compare"]:
        return compare(Path(argv[1]), Path(argv[2]))
    print(__doc__)
    return 2


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
