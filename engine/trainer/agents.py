"""One agent at training time: its model, tokenizer, optimizer, device, sampling settings, and the
two model calls the trainer makes (batched sampling, and padded log-prob forwards).

Several agents may hold the *same* model object (parameter sharing): each still has its own AdamW
over those parameters, so the weights and gradient buffers exist once while the optimizer moments
are per agent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from engine.trainer.losses import token_entropy, token_logprobs


@dataclass
class GenerationSettings:
    """Sampling settings of one agent (defaults come from the config)."""

    max_new_tokens: int
    temperature: float
    top_p: float
    top_k: int | None
    fast_decode: bool = True  # Llama-family tokens through engine.fast_decode (identical logits)


@dataclass
class SampledPrompt:
    """K completions for one prompt: token ids (prompt unpadded, completion trimmed after EOS) and text."""

    prompt_ids: list[int]
    completion_ids: list[list[int]]
    texts: list[str]
    logprobs: list[torch.Tensor] | None = None  # per completion, from the sampler (lean decoder)


@dataclass
class SequenceBatch:
    """Prompt + completion sequences packed for one forward pass."""

    input_ids: torch.Tensor  # (B, Lp + T): left-padded prompts then right-padded completions
    attention_mask: torch.Tensor  # (B, Lp + T)
    position_ids: torch.Tensor  # (B, Lp + T)
    completion_ids: torch.Tensor  # (B, T)
    completion_mask: torch.Tensor  # (B, T), 1 on real completion tokens


@dataclass
class AgentRuntime:
    """Everything the trainer needs about one agent."""

    index: int
    name: str
    model: Any
    tokenizer: Any
    device: torch.device
    learning_rate: float
    generation: GenerationSettings
    formatter: Any
    system_prompt: str | None = None
    optimizer: torch.optim.Optimizer | None = None
    reference_model: Any = None
    generator: torch.Generator | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    # -- sampling -------------------------------------------------------------------------------
    def sample(self, prompts: list[str], num_samples: int, *, greedy: bool = False) -> tuple[list[SampledPrompt], int]:
        """One batched sampling call over all prompts and all K samples. Returns per-prompt samples
        and the number of generated completion tokens."""
        from engine.sampling import generate_completions

        gen = generate_completions(
            self.model,
            self.tokenizer,
            prompts,
            num_samples=num_samples,
            max_new_tokens=self.generation.max_new_tokens,
            temperature=self.generation.temperature,
            top_p=self.generation.top_p,
            top_k=self.generation.top_k,
            do_sample=not greedy,
            generator=self.generator,
            fast_decode=self.generation.fast_decode,
        )
        return unpack_generation(gen, len(prompts), num_samples)

    # -- log-probs --------------------------------------------------------------------------------
    def pack(self, prompt_ids: list[list[int]], completion_ids: list[list[int]]) -> SequenceBatch:
        """Left-pad prompts and right-pad completions so every completion starts at the same column."""
        return pack_sequences(prompt_ids, completion_ids, pad_id=self.pad_id, device=self.device)

    def forward_logprobs(self, batch: SequenceBatch, *, model: Any = None,
                         with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Token log-probs of the completions (B, T) from one padded forward, plus optional entropy."""
        model = self.model if model is None else model
        t = batch.completion_ids.shape[1]
        logits = completion_logits(model, batch, t)
        logps = token_logprobs(logits, batch.completion_ids)
        entropy = None
        if with_entropy:
            with torch.no_grad():
                entropy = token_entropy(logits.detach())
        return logps, entropy


def unpack_generation(gen: Any, num_prompts: int, num_samples: int) -> tuple[list[SampledPrompt], int]:
    """Split a batched ``Generation`` into per-prompt samples (rows are prompt-major: p * K + k)."""
    comp_ids = gen.completion_ids.detach().cpu()
    comp_mask = gen.completion_mask.detach().cpu().bool()
    prompt_ids = gen.prompt_ids.detach().cpu()
    prompt_mask = gen.prompt_mask.detach().cpu().bool()
    token_logps = getattr(gen, "token_logprobs", None)
    token_logps = token_logps.detach().float().cpu() if token_logps is not None else None
    rows_per_prompt = prompt_ids.shape[0] // num_prompts
    out: list[SampledPrompt] = []
    for p in range(num_prompts):
        prow = p * rows_per_prompt
        ids = prompt_ids[prow][prompt_mask[prow]].tolist()
        rows = [p * num_samples + k for k in range(num_samples)]
        completions = [comp_ids[r][comp_mask[r]].tolist() for r in rows]
        logps = None if token_logps is None else [token_logps[r][comp_mask[r]].clone() for r in rows]
        out.append(SampledPrompt(ids, completions, [str(t) for t in gen.texts[p]], logps))
    return out, int(comp_mask.sum())


def pack_sequences(prompt_ids: list[list[int]], completion_ids: list[list[int]], *, pad_id: int,
                   device: torch.device) -> SequenceBatch:
    """Build the padded batch: ``[pad.. prompt | completion ..pad]`` with explicit position ids."""
    b = len(prompt_ids)
    lp = max(len(p) for p in prompt_ids)
    t = max(1, max(len(c) for c in completion_ids))
    input_ids = torch.full((b, lp + t), pad_id, dtype=torch.long)
    attention = torch.zeros((b, lp + t), dtype=torch.long)
    for row, (p, c) in enumerate(zip(prompt_ids, completion_ids, strict=True)):
        input_ids[row, lp - len(p):lp] = torch.tensor(p, dtype=torch.long)
        attention[row, lp - len(p):lp] = 1
        if c:
            input_ids[row, lp:lp + len(c)] = torch.tensor(c, dtype=torch.long)
            attention[row, lp:lp + len(c)] = 1
    position_ids = (attention.cumsum(-1) - 1).clamp_min(0)
    completion = input_ids[:, lp:]
    mask = attention[:, lp:]
    return SequenceBatch(
        input_ids=input_ids.to(device),
        attention_mask=attention.to(device),
        position_ids=position_ids.to(device),
        completion_ids=completion.to(device),
        completion_mask=mask.to(device),
    )


def completion_logits(model: Any, batch: SequenceBatch, num_completion: int) -> torch.Tensor:
    """Logits predicting each completion token (B, T, V): the positions from the last prompt token
    to the second-to-last completion column. Asks the model for only those positions when it can."""
    kwargs = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                  position_ids=batch.position_ids, use_cache=False)
    try:
        logits = model(**kwargs, logits_to_keep=num_completion + 1).logits
    except TypeError:
        logits = model(**kwargs).logits
    return logits[:, -(num_completion + 1):-1, :]
