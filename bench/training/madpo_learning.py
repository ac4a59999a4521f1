"""MADPO learning, measured outside the trainer: CoopLab's preference trainers against CoMLRL 1.4.3's.

The workload (issue 25's): two tiny Llama agents (2 layers, hidden 128, one byte-level BPE
tokenizer), 8 prompts, and a team reward whose halves belong to one agent each::

    reward = 0.5 * digit share of agent 1's text + 0.5 * capital-letter share of agent 2's

Learning is measured independently of every trainer's logs: before and after ``train()`` each agent
samples ``samples`` completions per prompt with plain ``model.generate`` (the training sampler's
temperature/top-k/top-p, a fixed torch seed), and the script reports the mean team reward and each
agent's own share. ``python -m bench.training.madpo_learning --side both --seeds 0 1 2`` prints,
per seed, the team gain and each agent's share before -> after (CoMLRL needs the optional
``comlrl==1.4.3`` package: ``bench.training.vs_comlrl.COMLRL_INSTALL``).

``--workload mixed`` runs issue 39's workload instead (:mod:`bench.training.madpo_mixed`: its own
tokenizer, agents, prompts and reward, 4 answers per prompt, no formatters); there a run's seed is the
script's ``torch.manual_seed`` (and ``random.seed``) just before the trainer is built, for both sides,
and CoopLab's config gives no seed, as a CoMLRL script ported by its imports does.

Sides: ``cooplab`` (``MADPOTrainer``), ``comlrl`` (CoMLRL's ``MADPOTrainer``), two measured departures
(``cooplab_clip1``: gradients clipped at 1.0, the default before issue 25; ``cooplab_last_unscored``:
CoMLRL's margins, which leave every completion's last token out), and for the check of
the other preference trainers ``madpo_iter``, ``marlhf``, ``marlhf_iter`` and ``centralized``
(``MADPOTrainer`` with ``collaboration_mode="centralized"``: one model writes both roles, split in
halves, and is measured the same way on its joint completion's halves).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

PROMPTS = [
    "Write about the harbour.", "Describe a quiet morning.", "Tell me about the old bridge.",
    "Report on the market.", "Explain the new rules.", "Note the weather today.",
    "Recall the long journey.", "List what the team needs.",
]  # fmt: skip

# issue 25's MADPOConfig (CoMLRL's field names), shared by every side
MADPO_SETTINGS: dict[str, Any] = dict(
    num_train_epochs=8, agent_learning_rate=1e-3, train_batch_size=2, rollout_buffer_size=2,
    preference_num_candidates=8, preference_pairs_per_sample=4, pair_selection="reward_gap", dpo_beta=0.1,
    use_environment_step=True, environment_steps_per_pair=2, max_new_tokens=16, temperature=1.0, top_p=1.0,
    top_k=50, eval_interval=0,
)  # fmt: skip
SIDES = ("cooplab", "comlrl", "cooplab_clip1", "cooplab_last_unscored", "madpo_iter", "marlhf", "marlhf_iter",
         "centralized")


def digit_share(text: str) -> float:
    return sum(ch.isdigit() for ch in text) / max(len(text), 1)


def capital_share(text: str) -> float:
    return sum(ch.isupper() for ch in text) / max(len(text), 1)


def team_reward(completions1: list[str], completions2: list[str]) -> list[float]:
    """0.5 x agent 1's digit share + 0.5 x agent 2's capital share, per joint answer."""
    return [0.5 * digit_share(a) + 0.5 * capital_share(b) for a, b in zip(completions1, completions2, strict=True)]


def formatters() -> list[Any]:
    return [lambda item: "Numbers: " + item["prompt"], lambda item: "Title: " + item["prompt"]]


def dataset() -> list[dict[str, str]]:
    return [{"prompt": p} for p in PROMPTS]


def tiny_agents(seed: int, num_agents: int = 2) -> tuple[list[Any], Any]:
    """``num_agents`` tiny Llamas (2 layers, hidden 128) with different seeded weights and one tokenizer."""
    from engine.models.tiny import build_tiny_tokenizer, seeded_model, tiny_config

    tokenizer = build_tiny_tokenizer(1024)
    config = tiny_config("llama", "s", tokenizer)  # hidden 128
    config.num_hidden_layers = 2
    return [seeded_model(config, tokenizer, 1000 * seed + i) for i in range(num_agents)], tokenizer


@dataclass(frozen=True)
class LearningWorkload:
    """What a learning run needs besides the trainer: agents, data, prompts, reward and config.

    ``run_seed`` says how a run seed picks the run: ``config`` (issue 25: ``seed`` in the config and
    the global RNGs seeded) or ``script`` (issue 39: ``torch.manual_seed``/``random.seed`` before the
    trainer is built, no seed in the config)."""

    name: str
    settings: dict[str, Any]
    agents: Callable[..., tuple[list[Any], Any]]  # (seed, num_agents=2) -> (models, tokenizer)
    dataset: Callable[[], list[dict[str, str]]]
    formatters: Callable[[], list[Any] | None]
    reward: Callable[[list[str], list[str]], list[float]]
    shares: tuple[Callable[[str], float], Callable[[str], float]]
    samples: int
    run_seed: str


def _mixed_workload() -> LearningWorkload:
    from bench.training import madpo_mixed as mixed

    return LearningWorkload("mixed", mixed.SETTINGS, lambda seed, num_agents=2: mixed.agents(seed), mixed.dataset,
                            lambda: None, mixed.team_reward, (mixed.digit_share, mixed.capital_share), mixed.SAMPLES,
                            "script")


ISSUE25 = LearningWorkload("issue25", MADPO_SETTINGS, lambda seed, num_agents=2: tiny_agents(seed, num_agents), dataset,
                           formatters, team_reward, (digit_share, capital_share), 16, "config")
WORKLOADS: dict[str, Callable[[], LearningWorkload]] = {"issue25": lambda: ISSUE25, "mixed": _mixed_workload}


def workload_named(name: str) -> LearningWorkload:
    if name not in WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; expected one of {', '.join(WORKLOADS)}")
    return WORKLOADS[name]()


@dataclass
class Measurement:
    """Mean team reward and each agent's share over the sampled answers."""

    team: float
    shares: list[float]
    samples: int

    def as_dict(self) -> dict[str, Any]:
        return {"team": self.team, "shares": self.shares, "samples": self.samples}


def _generate(model: Any, tokenizer: Any, prompts: list[str], samples: int, seed: int,
              settings: dict[str, Any] = MADPO_SETTINGS) -> list[list[str]]:
    """``samples`` sampled completions per prompt with plain ``model.generate`` (the config's sampling)."""
    import torch

    model.eval()
    out = []
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for prompt in prompts:
            enc = tokenizer(prompt, return_tensors="pt")
            gen = model.generate(**enc, do_sample=True, num_return_sequences=samples,
                                 max_new_tokens=settings["max_new_tokens"], temperature=settings["temperature"],
                                 top_p=settings["top_p"], top_k=settings["top_k"], pad_token_id=tokenizer.pad_token_id)
            out.append(tokenizer.batch_decode(gen[:, enc["input_ids"].shape[1]:], skip_special_tokens=True))
    return out


def measure(models: list[Any], tokenizer: Any, *, samples: int = 16, seed: int = 12345,
            workload: LearningWorkload = ISSUE25) -> Measurement:
    """Team reward and per-agent shares of ``samples`` answers per prompt from each agent (aligned)."""
    forms = workload.formatters() or [lambda item: item["prompt"]] * len(models)
    items = workload.dataset()
    texts = [_generate(m, tokenizer, [forms[i](item) for item in items], samples, seed + i, workload.settings)
             for i, m in enumerate(models)]
    first = [t for per_prompt in texts[0] for t in per_prompt]
    second = [t for per_prompt in texts[1] for t in per_prompt]
    return Measurement(team=statistics.fmean(workload.reward(first, second)),
                       shares=[statistics.fmean(map(workload.shares[0], first)),
                               statistics.fmean(map(workload.shares[1], second))],
                       samples=len(first))


def measure_joint(model: Any, tokenizer: Any, adapter: Any, *, samples: int = 16, seed: int = 12345) -> Measurement:
    """:func:`measure` for one joint model: its completion of the joint prompt, split by ``adapter``."""
    forms = formatters()
    items = dataset()
    prompts = [adapter.build_prompt(item, [f(item) for f in forms]) for item in items]
    roles = [adapter.parse_completion(t, item, 2)
             for item, per_prompt in zip(items, _generate(model, tokenizer, prompts, samples, seed), strict=True)
             for t in per_prompt]
    first, second = [r[0] for r in roles], [r[1] for r in roles]
    return Measurement(team=statistics.fmean(team_reward(first, second)),
                       shares=[statistics.fmean(map(digit_share, first)), statistics.fmean(map(capital_share, second))],
                       samples=len(first))


@dataclass
class Result:
    side: str
    seed: int
    before: Measurement
    after: Measurement
    train_s: float
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def gain(self) -> float:
        return self.after.team - self.before.team

    def as_dict(self) -> dict[str, Any]:
        return {"side": self.side, "seed": self.seed, "gain": self.gain, "before": self.before.as_dict(),
                "after": self.after.as_dict(), "train_s": self.train_s, **self.extra}


def _seed_all(seed: int) -> None:
    import torch

    random.seed(seed)
    torch.manual_seed(seed)


def _config_seed(workload: LearningWorkload, seed: int) -> dict[str, Any]:
    """Seed the global RNGs for a run (both sides alike) and the config's ``seed`` for CoopLab: the run
    seed itself (issue 25), or none, so the trainer draws it from the seeded RNG as CoMLRL samples
    from it (issue 39)."""
    _seed_all(seed)
    return {"seed": seed} if workload.run_seed == "config" else {"seed": None}


def _last_token_unscored(trainer_cls: type) -> type:
    """``trainer_cls`` whose margins leave each completion's last token out, as CoMLRL 1.4.3's do (its
    logits slice is one position short): the departure this bench measures."""
    import torch

    from engine.trainer.losses import reduce_tokens

    class LastTokenUnscored(trainer_cls):
        def _margin_forward(self, agent: Any, pairs: Any, model: Any) -> Any:
            i = agent.index
            packed = agent.pack([p.prompt_ids[i] for p in pairs] + [p.loser_prompt_ids[i] for p in pairs],
                                [p.winner_ids[i] for p in pairs] + [p.loser_ids[i] for p in pairs])
            logps, _ = agent.forward_logprobs(packed, model=model)
            mask = packed.completion_mask.clone()
            last = (mask.sum(1) - 1).clamp_min(0)
            mask[torch.arange(mask.shape[0]), last] = 0
            seq = reduce_tokens(logps, mask, self.args.loss_type)
            return seq[:len(pairs)] - seq[len(pairs):]

    return LastTokenUnscored


def run_cooplab(seed: int, samples: int = 16, *, last_token_scored: bool = True, workload: LearningWorkload = ISSUE25,
                **overrides: Any) -> Result:
    """CoopLab's ``MADPOTrainer`` on the workload (``overrides`` change the config)."""
    from engine import MADPOConfig, MADPOTrainer

    trainer_cls = MADPOTrainer if last_token_scored else _last_token_unscored(MADPOTrainer)

    models, tokenizer = workload.agents(seed)
    before = measure(models, tokenizer, samples=samples, workload=workload)
    config = MADPOConfig(**{**workload.settings, **_config_seed(workload, seed), "transcripts_per_step": 0,
                            **overrides})
    trainer = trainer_cls(agents=models, tokenizer=tokenizer, train_dataset=workload.dataset(),
                          reward_func=workload.reward, formatters=workload.formatters(), args=config)
    started = time.perf_counter()
    try:
        trainer.train()
    finally:
        trainer.close()
    took = time.perf_counter() - started
    return Result("cooplab", seed, before, measure(models, tokenizer, samples=samples, workload=workload), took,
                  {"pairs": len(trainer.pairs), "steps": trainer.step, "run_seed": trainer.args.seed})


def run_comlrl(seed: int, samples: int = 16, *, workload: LearningWorkload = ISSUE25) -> Result:
    """CoMLRL 1.4.3's ``MADPOTrainer`` on the same agents, data, reward and config."""
    from bench.training.vs_comlrl import import_comlrl

    import_comlrl()
    from comlrl.trainers.preference.madpo import MADPOConfig, MADPOTrainer
    from datasets import Dataset

    models, tokenizer = workload.agents(seed)
    before = measure(models, tokenizer, samples=samples, workload=workload)
    _config_seed(workload, seed)  # CoMLRL samples with the global torch RNG and shuffles with the global random
    trainer = MADPOTrainer(agents=models, tokenizer=tokenizer, train_dataset=Dataset.from_list(workload.dataset()),
                           reward_func=workload.reward, formatters=workload.formatters(),
                           args=MADPOConfig(**workload.settings), wandb_config=None)
    trainer.verbose = False
    counted = {"updates": 0, "pairs": 0}
    update, build = trainer._update_from_preference_batch, trainer._build_preference_dataset

    def counting_update(batch: Any) -> Any:
        counted["updates"] += 1
        return update(batch)

    def counting_build(**kwargs: Any) -> Any:
        pairs = build(**kwargs)
        counted["pairs"] = len(pairs)
        return pairs

    trainer._update_from_preference_batch, trainer._build_preference_dataset = counting_update, counting_build
    started = time.perf_counter()
    trainer.train()
    took = time.perf_counter() - started
    return Result("comlrl", seed, before, measure(models, tokenizer, samples=samples, workload=workload), took,
                  {"pairs": counted["pairs"], "steps": counted["updates"]})


def run_other(side: str, seed: int, samples: int = 16) -> Result:
    """The other preference trainers on the workload: ``madpo_iter`` (3 iterations, comparator = the
    current policy), ``marlhf`` / ``marlhf_iter`` (MAGRPO stage against the learned reward) and
    ``centralized`` (one joint model, halves protocol)."""
    from engine import MADPOConfig, MADPOTrainer
    from engine.schema.preference_configs import MADPOIterConfig, MARLHFConfig, MARLHFIterConfig

    base = {**MADPO_SETTINGS, "seed": seed, "transcripts_per_step": 0}
    if side == "centralized":
        from engine.preference.centralized import EqualPartsCentralizedAdapter

        models, tokenizer = tiny_agents(seed, num_agents=1)
        adapter = EqualPartsCentralizedAdapter()
        before = measure_joint(models[0], tokenizer, adapter, samples=samples)
        _seed_all(seed)
        trainer = MADPOTrainer(agents=models, tokenizer=tokenizer, num_agents=2, train_dataset=dataset(),
                               reward_func=team_reward, formatters=formatters(), centralized_adapter=adapter,
                               args=MADPOConfig(**{**base, "collaboration_mode": "centralized",
                                                   "max_new_tokens": 2 * MADPO_SETTINGS["max_new_tokens"]}))
        started = time.perf_counter()
        trainer.train()
        took = time.perf_counter() - started
        return Result(side, seed, before, measure_joint(models[0], tokenizer, adapter, samples=samples), took,
                      {"pairs": len(trainer.pairs), "steps": trainer.step})
    models, tokenizer = tiny_agents(seed)
    before = measure(models, tokenizer, samples=samples)
    _seed_all(seed)
    if side == "madpo_iter":
        from engine.preference.madpo_iter import MADPOIterTrainer

        config = MADPOIterConfig(**{**base, "num_iterations": 3, "num_train_epochs": 3, "comparator_policy": "current",
                                    "pair_selection": "reward_gap"})
        trainer = MADPOIterTrainer(agents=models, tokenizer=tokenizer, train_dataset=dataset(),
                                   reward_func=team_reward, formatters=formatters(), args=config)
    elif side in ("marlhf", "marlhf_iter"):
        rl = {k: v for k, v in base.items() if k not in ("dpo_beta", "train_batch_size")}
        rl.update(num_train_epochs=4, num_generations=4, agent_learning_rate=3e-4, reward_learning_rate=1e-3,
                  reward_num_train_epochs=4, reward_train_batch_size=4, reward_model_device="cpu")
        if side == "marlhf":
            from engine.preference.marlhf import MARLHFTrainer as cls

            config = MARLHFConfig(**rl)
        else:
            from engine.preference.marlhf_iter import MARLHFIterTrainer as cls

            config = MARLHFIterConfig(**{**rl, "num_iterations": 2, "num_train_epochs": 2,
                                         "comparator_policy": "current", "pair_selection": "reward_gap"})
        trainer = cls(agents=models, tokenizer=tokenizer, train_dataset=dataset(), reward_func=team_reward,
                      formatters=formatters(), args=config)
    else:
        raise ValueError(f"unknown side {side!r}; expected one of {', '.join(SIDES)}")
    started = time.perf_counter()
    trainer.train()
    took = time.perf_counter() - started
    return Result(side, seed, before, measure(models, tokenizer, samples=samples), took, {"steps": trainer.step})


def run_side(side: str, seed: int, samples: int = 16, workload: LearningWorkload = ISSUE25) -> Result:
    import torch

    torch.set_num_threads(1)
    if side == "cooplab":
        return run_cooplab(seed, samples, workload=workload)
    if side == "cooplab_clip1":
        return replace(run_cooplab(seed, samples, workload=workload, max_grad_norm=1.0), side=side)
    if side == "cooplab_last_unscored":
        return replace(run_cooplab(seed, samples, last_token_scored=False, workload=workload), side=side)
    if side == "comlrl":
        return run_comlrl(seed, samples, workload=workload)
    if workload is not ISSUE25:
        raise ValueError(f"side {side!r} runs on the issue25 workload only")
    return run_other(side, seed, samples)


def format_result(r: Result) -> str:
    b, a = r.before, r.after
    return (f"{r.side:12} seed {r.seed}: team {b.team:.3f} -> {a.team:.3f} (gain {r.gain:+.3f}); "
            f"agent 1 digit share {b.shares[0]:.3f} -> {a.shares[0]:.3f}; "
            f"agent 2 capital share {b.shares[1]:.3f} -> {a.shares[1]:.3f}; "
            f"{r.extra.get('pairs', '-')} pairs, {r.extra.get('steps', '-')} steps, train {r.train_s:.1f} s")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--side", nargs="+", default=["cooplab"], help=f"{', '.join(SIDES)} or both")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--samples", type=int, default=None,
                        help="answers per prompt and agent in a measurement (default: the workload's, 16 or 4)")
    parser.add_argument("--workload", choices=sorted(WORKLOADS), default="issue25",
                        help="issue25 (default) or mixed (issue 39's: bench.training.madpo_mixed)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    workload = workload_named(args.workload)
    samples = args.samples or workload.samples
    sides = [s for name in args.side for s in (("cooplab", "comlrl") if name == "both" else (name,))]
    results: dict[str, list[Result]] = {s: [] for s in sides}
    for seed in args.seeds:
        for side in sides:
            r = run_side(side, seed, samples, workload)
            results[side].append(r)
            print(json.dumps(r.as_dict()) if args.json else format_result(r), flush=True)
    for side, rs in results.items():
        print(f"{side:12} mean team gain over seeds {args.seeds}: {statistics.fmean(r.gain for r in rs):+.3f}")
    if "cooplab" in results and "comlrl" in results:
        print(comparison_table(results["comlrl"], results["cooplab"]))
    return 0


def comparison_table(comlrl: list[Result], cooplab: list[Result]) -> str:
    """Per seed: CoMLRL's and CoopLab's team gain, and CoMLRL's ``train()`` seconds over CoopLab's (a
    markdown table; the last row is the mean gains and the ratio of the summed seconds)."""
    lines = ["| seed | CoMLRL gain | CoopLab gain | CoopLab >= CoMLRL | speed (CoMLRL s / CoopLab s) |",
             "|---|---|---|---|---|"]
    for theirs, ours in zip(comlrl, cooplab, strict=True):
        lines.append(f"| {ours.seed} | {theirs.gain:+.3f} | {ours.gain:+.3f} | {'yes' if ours.gain >= theirs.gain else 'no'} "
                     f"| {theirs.train_s / ours.train_s:.2f}x ({theirs.train_s:.1f} / {ours.train_s:.1f}) |")
    mean_theirs, mean_ours = statistics.fmean(r.gain for r in comlrl), statistics.fmean(r.gain for r in cooplab)
    ratio = sum(r.train_s for r in comlrl) / sum(r.train_s for r in cooplab)
    lines.append(f"| mean | {mean_theirs:+.3f} | {mean_ours:+.3f} | {'yes' if mean_ours >= mean_theirs else 'no'} "
                 f"| {ratio:.2f}x |")
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
