"""The benchmark of record's workload: its settings, the tokenizer, prompts, reward and the team.

Every model is a :mod:`bench.shapes` shape with random weights. Its tokenizer is a word-level one
built in process with one word per model token (``w1`` ... ``w151935``, ``<pad>`` at 0), so a prompt
of N words is exactly N tokens and every sampled id decodes to a word; the end-of-sequence token is
added past the model's vocabulary (:func:`bench.training.workload.never_eos`), so no sampler can
stop early and every engine generates exactly ``max_new_tokens`` per completion.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from bench.shapes import SHAPES, build_model
from bench.training.workload import NEVER_EOS_TOKEN, never_eos


@dataclass(frozen=True)
class GpuWorkload:
    """What the benchmark runs (the defaults are the record; :data:`CPU_TINY` is the suite's)."""

    shapes: tuple[str, ...] = ("qwen2.5-0.5b", "qwen2.5-1.5b", "qwen2.5-3b")
    num_agents: int = 2
    prompts: int = 16  # dataset items per step, all sampled in one call per agent
    prompt_tokens: int = 128
    num_generations: int = 8  # K
    max_new_tokens: int = 256
    steps: int = 3  # timed steps
    warmup_steps: int = 1
    dtype: str = "bfloat16"
    micro_batch_size: int | None = 16  # sequences per forward + backward in the update (one AdamW step a step)
    learning_rate: float = 1e-6
    temperature: float = 0.6  # CoMLRL's sampling defaults, for both trainers
    top_p: float = 0.6
    top_k: int | None = 50
    comlrl_items: int = 2  # items per CoMLRL step (it rolls items out one at a time: compared per token)
    comlrl_steps: int = 1  # CoMLRL's timed steps, after one warm-up step
    seed: int = 0

    @property
    def batch(self) -> int:
        """Rows of one agent's sampling call: prompts x K."""
        return self.prompts * self.num_generations

    @property
    def generated_tokens_per_step(self) -> int:
        """Every agent's completions at full length (EOS unreachable)."""
        return self.num_agents * self.batch * self.max_new_tokens

    def check(self) -> None:
        """A clear error for a setting the benchmark cannot run."""
        unknown = [s for s in self.shapes if s not in SHAPES]
        if unknown:
            raise ValueError(f"unknown shape(s) {unknown}: choose from {sorted(SHAPES)}")
        for name in ("num_agents", "prompts", "prompt_tokens", "num_generations", "max_new_tokens", "steps",
                     "comlrl_items", "comlrl_steps"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.num_generations < 2:
            raise ValueError(f"num_generations must be >= 2 (a group baseline needs two samples), got "
                             f"{self.num_generations}")
        if self.dtype not in ("bfloat16", "float32", "float16"):
            raise ValueError(f"dtype {self.dtype!r}: choose bfloat16, float16 or float32")


# the suite's run of the same script on the CPU: a tiny shape, a few tokens, one timed step
CPU_TINY = GpuWorkload(shapes=("tiny",), prompts=2, prompt_tokens=8, num_generations=2, max_new_tokens=6, steps=1,
                       micro_batch_size=None, comlrl_items=1)


def word_tokenizer(vocab_size: int) -> Any:
    """A word-level tokenizer with one token per model row: ``<pad>`` (0), ``w1`` ... and the
    end-of-sequence token past the vocabulary (id ``vocab_size``); prompts are left-padded."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<pad>": 0, **{f"w{i}": i for i in range(1, vocab_size)}}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<pad>"))
    core.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=core, pad_token="<pad>", padding_side="left",
                                        model_max_length=1 << 20, clean_up_tokenization_spaces=False)
    tokenizer.add_special_tokens({"eos_token": NEVER_EOS_TOKEN})
    if tokenizer.eos_token_id != vocab_size:
        raise ValueError(f"the end-of-sequence token got id {tokenizer.eos_token_id}, expected {vocab_size}")
    return tokenizer


def prompt_texts(w: GpuWorkload, count: int, vocab_size: int) -> list[str]:
    """``count`` distinct prompts of exactly ``w.prompt_tokens`` words (= tokens), seeded."""
    rng = random.Random(w.seed)
    return [" ".join(f"w{rng.randrange(1, vocab_size)}" for _ in range(w.prompt_tokens)) for _ in range(count)]


def dataset(w: GpuWorkload, items: int, vocab_size: int) -> list[dict[str, str]]:
    """The training items: every step's prompts, in order."""
    return [{"prompt": text} for text in prompt_texts(w, items, vocab_size)]


def identity_formatters(num_agents: int) -> list[Any]:
    """Each agent sees the item's prompt as it is (no role prefix, so every prompt is exactly its length)."""
    return [lambda item: item["prompt"] for _ in range(num_agents)]


class SeededReward:
    """A team reward drawn from a seeded generator, one per joint action: the benchmark times the
    trainers, not a task, and distinct rewards keep every advantage (and so the update) nonzero."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = random.Random(seed)
        self.completions = 0  # completions seen, and their words (= tokens, but for a sampled <pad>, dropped
        self.words = 0  # when decoding): a check that a trainer generated every completion to full length

    def __call__(self, *agent_completions: list[str]) -> list[float]:
        for texts in agent_completions:
            self.completions += len(texts)
            self.words += sum(len(text.split()) for text in texts)
        return [self.rng.random() for _ in agent_completions[0]]


def build_team(shape: str, device: str, w: GpuWorkload, dtype: Any = None) -> tuple[list[Any], Any]:
    """``w.num_agents`` random models of ``shape`` (seeds 0, 1, ...) on ``device`` and their shared
    word-level tokenizer, EOS unreachable for every sampler."""
    import torch

    tokenizer = word_tokenizer(SHAPES[shape]["vocab_size"])
    dtype = dtype if dtype is not None else getattr(torch, w.dtype)
    models = [build_model(shape, device, dtype, seed=w.seed + i, tokenizer=tokenizer)[0] for i in range(w.num_agents)]
    for model in models:
        never_eos(model, tokenizer)
    return models, tokenizer


def parameter_count(model: Any) -> int:
    """Distinct parameters (a tied embedding counted once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def weight_bytes(model: Any) -> int:
    """Bytes of the distinct parameters in their dtype: what a decode step reads."""
    return sum(p.numel() * p.element_size() for p in {id(p): p for p in model.parameters()}.values())
