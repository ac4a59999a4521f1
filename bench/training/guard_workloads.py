"""The learning guard's workloads: one seeded tiny team per trainer family, and its learning measured
outside the trainer.

Every family trains tiny random Llamas (hidden 96, 2 layers, one byte-level BPE tokenizer) on four
training prompts for a second or two, with the team reward::

    reward = 0.5 * digit share of role 1's text + 0.5 * capital-letter share of role 2's

(one agent, GRPO: its digit share). Learning is measured without the trainer: before and after
``train()`` each agent samples :data:`SAMPLES` answers to each of four held-out prompts with plain
``model.generate`` (the training sampler's temperature, top-k, top-p and length; a fixed torch seed
per agent), the answers are paired in order, and the measurement is the mean team reward. A
centralized model writes both roles in one completion, cut in halves
(:class:`engine.preference.centralized.EqualPartsCentralizedAdapter`). The after-training token ids
are hashed (:func:`fingerprint`) so a change in any sampled token shows.

Each family's settings use CoMLRL 1.4.3's field names only (:data:`FAMILIES`), so CoMLRL's trainers
run the same work (:mod:`bench.training.guard_comlrl`); CoopLab's side adds only ``seed`` and
``transcripts_per_step=0``. Torch computes on one thread while a family runs (:func:`one_thread`).

:data:`VARIANTS` are what-if forms of CoopLab's side for a comparison with CoMLRL (the bench's
``--cooplab-variant``; never recorded): each changes one thing CoMLRL does differently.
"""

from __future__ import annotations

import contextlib
import hashlib
import random
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

TRAIN_PROMPTS = ("Count:", "Numbers:", "Write:", "Go:")
HELDOUT_PROMPTS = ("List:", "Say:", "Next:", "Tell:")
ROLE_PREFIXES = ("Numbers: ", "Title: ")
SAMPLES = 16  # answers per held-out prompt and agent in a measurement
MEASURE_SEED = 4242  # agent i samples its measurement from torch seed MEASURE_SEED + i
TOKENS = 8  # max_new_tokens of one role

# What every family shares (CoMLRL's names): the sampler, single turn, no evaluation.
SAMPLING: dict[str, Any] = dict(num_turns=1, max_new_tokens=TOKENS, temperature=1.0, top_p=1.0, top_k=50,
                                eval_interval=0, logging_steps=1000)


# What-if forms of CoopLab's side (never recorded): each changes one thing CoMLRL does differently.
VARIANTS: dict[str, str] = {
    "no_clip": "max_grad_norm None: no gradient clipping, as in CoMLRL",
    "plain_text": "the reward reads tokenizer.batch_decode(..., skip_special_tokens=True) of the tokens up to EOS: a "
                  "UTF-8 sequence cut by max_new_tokens stays U+FFFD, as in CoMLRL's text (CoopLab drops it)",
}


@dataclass(frozen=True)
class Family:
    """One trainer family: its algorithm, its team shape and its settings (CoMLRL's field names)."""

    name: str
    settings: dict[str, Any]
    models: int = 2  # models trained: 1 for GRPO and the centralized baseline
    roles: int = 2  # roles the reward scores

    @property
    def centralized(self) -> bool:
        return self.models == 1 and self.roles == 2

    @property
    def max_new_tokens(self) -> int:
        """The sampled length: a centralized model writes every role's answer in one completion."""
        return TOKENS * self.roles if self.centralized else TOKENS


# MAGRPO's rollouts: 8 answers per item, one update per pass over the 4 items (a batch wide enough that the
# gain varies less between seeds), 8 passes.
_RL = dict(num_generations=8, rollout_buffer_size=4, agent_learning_rate=1e-2, num_train_epochs=8)
# Without z-scoring, so each baseline shapes the update (with it, as in CoMLRL, a baseline that is one
# number per group cancels, and MAREINFORCE, MAReMax and MARLOO update exactly as MAGRPO does).
_UNNORMALIZED = dict(num_generations=4, rollout_buffer_size=1, num_train_epochs=5, advantage_normalization=False)
_AC = dict(num_generations=1, rollout_buffer_size=4, critic_learning_rate=1e-2)  # CoMLRL's K=1
_DPO = dict(preference_num_candidates=16, preference_pairs_per_sample=4, pair_selection="reward_gap", dpo_beta=0.1,
            agent_learning_rate=1e-2, num_train_epochs=4, train_batch_size=4, rollout_buffer_size=4)
_RLHF = dict(preference_num_candidates=16, preference_pairs_per_sample=4, pair_selection="reward_gap",
             reward_learning_rate=1e-3, reward_num_train_epochs=2, reward_train_batch_size=4, reward_model_device="cpu",
             num_generations=4, rollout_buffer_size=1, agent_learning_rate=3e-3, num_train_epochs=3)
FAMILIES: dict[str, Family] = {f.name: f for f in (
    Family("magrpo", _RL),
    Family("grpo", _RL, models=1, roles=1),
    Family("mareinforce", {**_UNNORMALIZED, "agent_learning_rate": 1e-2}),
    Family("maremax", _RL),  # unnormalized, its all-negative advantages learned too unsteadily for a guard
    Family("marloo", {**_UNNORMALIZED, "agent_learning_rate": 3e-3}),
    Family("centralized_magrpo", _RL, models=1),
    Family("iac", {**_AC, "agent_learning_rate": 1e-2, "num_train_epochs": 15}),
    Family("maac", {**_AC, "agent_learning_rate": 3e-3, "num_train_epochs": 20}),
    Family("madpo", _DPO),
    Family("madpo_iter", {**_DPO, "num_iterations": 2, "num_train_epochs": 2, "comparator_policy": "current"}),
    Family("marlhf", _RLHF),
    Family("marlhf_iter", {**_RLHF, "num_iterations": 2, "num_train_epochs": 1, "comparator_policy": "current"}),
)}  # fmt: skip


def digit_share(text: str) -> float:
    return sum(ch.isdigit() for ch in text) / max(len(text), 1)


def capital_share(text: str) -> float:
    return sum(ch.isupper() for ch in text) / max(len(text), 1)


def team_reward(*completions: list[str]) -> list[float]:
    """0.5 x role 1's digit share + 0.5 x role 2's capital share per joint answer (one role: its digit share)."""
    if len(completions) == 1:
        return [digit_share(a) for a in completions[0]]
    first, second = completions
    return [0.5 * digit_share(a) + 0.5 * capital_share(b) for a, b in zip(first, second, strict=True)]


def formatters(roles: int) -> list[Callable[[dict[str, str]], str]]:
    """Role i's prompt: its prefix and the item's prompt."""
    return [(lambda item, prefix=prefix: prefix + item["prompt"]) for prefix in ROLE_PREFIXES[:roles]]


def train_dataset() -> list[dict[str, str]]:
    return [{"prompt": p} for p in TRAIN_PROMPTS]


def heldout_dataset() -> list[dict[str, str]]:
    return [{"prompt": p} for p in HELDOUT_PROMPTS]


def tiny_team(family: Family, seed: int) -> tuple[list[Any], Any]:
    """``family.models`` tiny Llamas with seeded weights (model i from ``1000 * seed + i``) and their one tokenizer."""
    from engine.models.tiny import build_tiny_tokenizer, seeded_model, tiny_config

    tokenizer = build_tiny_tokenizer(1024)
    config = tiny_config("llama", "xs", tokenizer)
    return [seeded_model(config, tokenizer, 1000 * seed + i) for i in range(family.models)], tokenizer


@contextlib.contextmanager
def one_thread() -> Iterator[None]:
    """Torch computes on one intra-op thread inside the block (bit-for-bit repeatable on one CPU)."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def seed_globals(seed: int) -> None:
    """Python's, numpy's and torch's global RNGs from ``seed`` (CoMLRL samples and shuffles with them)."""
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


@dataclass
class Measurement:
    """The mean team reward of the sampled held-out answers and the token ids they were decoded from."""

    team: float
    token_ids: list[list[int]] = field(repr=False)

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.token_ids)


def fingerprint(token_ids: Sequence[Sequence[int]]) -> str:
    """sha256 of the sampled token ids, one answer a line (changes when any sampled token does)."""
    text = "\n".join(",".join(str(int(t)) for t in ids) for ids in token_ids)
    return hashlib.sha256(text.encode()).hexdigest()


def sample(model: Any, tokenizer: Any, prompts: Sequence[str], *, max_new_tokens: int,
           seed: int) -> tuple[list[str], list[list[int]]]:
    """:data:`SAMPLES` answers per prompt from plain ``model.generate`` (the workload's sampler, torch seed
    ``seed``; the global RNG is left as it was): the texts and their token ids, prompt by prompt."""
    import torch

    model.eval()
    texts: list[str] = []
    ids: list[list[int]] = []
    with torch.no_grad(), torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        for prompt in prompts:
            enc = tokenizer(prompt, return_tensors="pt")
            out = model.generate(**enc, do_sample=True, num_return_sequences=SAMPLES, max_new_tokens=max_new_tokens,
                                 temperature=SAMPLING["temperature"], top_p=SAMPLING["top_p"],
                                 top_k=SAMPLING["top_k"], pad_token_id=tokenizer.pad_token_id)
            new = out[:, enc["input_ids"].shape[1]:]
            texts.extend(tokenizer.batch_decode(new, skip_special_tokens=True))
            ids.extend(new.tolist())
    return texts, ids


def measure(family: Family, models: Sequence[Any], tokenizer: Any) -> Measurement:
    """The team reward of the held-out answers (see the module docstring)."""
    items = heldout_dataset()
    forms = formatters(family.roles)
    if family.centralized:
        from engine.preference.centralized import EqualPartsCentralizedAdapter

        adapter = EqualPartsCentralizedAdapter()
        prompts = [adapter.build_prompt(item, [f(item) for f in forms]) for item in items]
        texts, ids = sample(models[0], tokenizer, prompts, max_new_tokens=family.max_new_tokens, seed=MEASURE_SEED)
        owners = [item for item in items for _ in range(SAMPLES)]
        parts = [adapter.parse_completion(t, item, family.roles) for t, item in zip(texts, owners, strict=True)]
        roles = [[p[r] for p in parts] for r in range(family.roles)]
        return Measurement(statistics.fmean(team_reward(*roles)), ids)
    roles, ids = [], []
    for i, (model, form) in enumerate(zip(models, forms, strict=True)):
        texts, agent_ids = sample(model, tokenizer, [form(item) for item in items], max_new_tokens=family.max_new_tokens,
                                  seed=MEASURE_SEED + i)
        roles.append(texts)
        ids.extend(agent_ids)
    return Measurement(statistics.fmean(team_reward(*roles)), ids)


@dataclass
class Result:
    """One family's learning on one seed: before and after training, and the CPU seconds it took."""

    family: str
    seed: int
    before: Measurement
    after: Measurement
    cpu_s: float
    side: str = "cooplab"

    @property
    def gain(self) -> float:
        return self.after.team - self.before.team

    def record(self) -> dict[str, Any]:
        """The numbers the guard keeps (``cpu_s`` rounded: it is informative, never compared)."""
        return {"before": self.before.team, "after": self.after.team, "gain": self.gain,
                "fingerprint": self.after.fingerprint, "cpu_s": round(self.cpu_s, 2)}


def cooplab_settings(family: Family, seed: int, variants: Sequence[str] = ()) -> dict[str, Any]:
    """The settings CoopLab's trainer of ``family`` gets: the workload's plus ``seed`` and no transcripts
    (and no clipping with the ``no_clip`` variant)."""
    check_variants(variants)
    settings = {**SAMPLING, **family.settings, "seed": seed, "transcripts_per_step": 0}
    if "no_clip" in variants:
        settings["max_grad_norm"] = None
    return settings


def check_variants(variants: Sequence[str]) -> None:
    unknown = sorted(set(variants) - set(VARIANTS))
    if unknown:
        raise ValueError(f"unknown CoopLab variant(s) {unknown}; choose from {sorted(VARIANTS)}")


def _plain_decode(tokenizer: Any, rows: Sequence[Sequence[int]]) -> list[str]:
    return tokenizer.batch_decode(rows, skip_special_tokens=True)


@contextlib.contextmanager
def variant_context(variants: Sequence[str]) -> Iterator[None]:
    """Inside the block the ``plain_text`` variant (when named) gives the sampler CoMLRL's decoding."""
    check_variants(variants)
    if "plain_text" not in variants:
        yield
        return
    from engine.sampling import sampler

    original = sampler.decode_completions
    sampler.decode_completions = _plain_decode
    try:
        yield
    finally:
        sampler.decode_completions = original


def cooplab_trainer(family: Family, models: list[Any], tokenizer: Any, seed: int, variants: Sequence[str] = ()) -> Any:
    """CoopLab's trainer of ``family`` on the workload (:func:`cooplab_settings`)."""
    from engine.schema.algorithms import CONFIG_CLASSES, trainer_class

    algorithm = "magrpo" if family.name == "grpo" else family.name
    settings = cooplab_settings(family, seed, variants)
    if family.name in ("mareinforce", "maremax", "marloo"):
        from engine.schema import configs

        config_cls = {"mareinforce": configs.MAREINFORCEConfig, "maremax": configs.MAReMaxConfig,
                      "marloo": configs.MARLOOConfig}[family.name]
    else:
        config_cls = CONFIG_CLASSES[algorithm]
    kwargs: dict[str, Any] = dict(agents=models, tokenizer=tokenizer, train_dataset=train_dataset(),
                                  reward_func=team_reward, formatters=formatters(family.roles))
    if family.centralized:
        from engine.preference.centralized import EqualPartsCentralizedAdapter

        settings["max_new_tokens"] = family.max_new_tokens
        kwargs.update(num_agents=family.roles, centralized_adapter=EqualPartsCentralizedAdapter())
    elif family.models == 1:
        kwargs["num_agents"] = 1
    return trainer_class(algorithm)(**kwargs, args=config_cls(**settings))


def run_cooplab(name: str, seed: int, variants: Sequence[str] = ()) -> Result:
    """Build ``name``'s team, measure, train with CoopLab (in its ``variants``), measure again (one torch thread)."""
    family = FAMILIES[name]
    with one_thread():
        started = time.process_time()
        models, tokenizer = tiny_team(family, seed)
        before = measure(family, models, tokenizer)
        trainer = cooplab_trainer(family, models, tokenizer, seed, variants)
        try:
            with variant_context(variants):
                trainer.train()
        finally:
            close = getattr(trainer, "close", None)
            if close is not None:
                close()
        after = measure(family, models, tokenizer)
        return Result(name, seed, before, after, time.process_time() - started)
