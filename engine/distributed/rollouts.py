"""Rollouts on FSDP ranks: each rank samples ``K`` completions of each prompt of its groups.

Every forward of a sharded model is collective (its layers are all-gathered from every rank of the
mesh), so every rank must run the same number of forwards: :func:`sample_groups` always runs
``max_new_tokens`` decoding steps, whatever its prompts and whenever its rows end (a row that has
sampled an EOS is padded from then on; its completion ends at the EOS). Each group draws from a
generator seeded by its own seed, so a group's samples do not depend on which rank holds it or on
the other groups of its batch, beyond the floating-point rounding of a batch of another shape.
A sharded model is resharded afterwards: FSDP2 keeps the root's parameters gathered after a forward
with no backward (without the reshard, the update that followed sampling differed from the
single-process update by the size of a step, 1e-2, in the two-rank test).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from engine.sampling.decoder import filter_logits


@torch.no_grad()
def sample_groups(model: Any, prompts: Sequence[list[int]], k: int, *, max_new_tokens: int, seeds: Sequence[int],
                  eos_id: int, pad_id: int, temperature: float = 1.0, top_p: float = 1.0,
                  top_k: int | None = None) -> list[list[list[int]]]:
    """``k`` completions of each prompt (``prompts[g]`` sampled with ``seeds[g]``), a list per prompt.

    Decodes without a cache: each step is one forward of the whole (left-padded) batch, exactly
    ``max_new_tokens`` of them on every rank. Temperature, top-k and top-p filter the logits as the
    trainer's decoders do (:func:`engine.sampling.decoder.filter_logits`)."""
    if len(seeds) != len(prompts):
        raise ValueError(f"{len(prompts)} prompts need as many seeds (got {len(seeds)})")
    if not prompts:
        raise ValueError("every rank needs at least one prompt to sample: its forwards are collective")
    device = next(iter(model.parameters())).device
    width = max(len(p) for p in prompts)
    rows = [p for p in prompts for _ in range(k)]
    ids = torch.tensor([[pad_id] * (width - len(p)) + p for p in rows], device=device)
    mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in rows], device=device)
    generators = [torch.Generator().manual_seed(int(seed)) for seed in seeds]
    done = torch.zeros(len(rows), dtype=torch.bool, device=device)
    was_training = model.training
    model.eval()
    try:
        for _ in range(max_new_tokens):
            positions = (mask.cumsum(-1) - 1).clamp_min(0)
            logits = model(input_ids=ids, attention_mask=mask, position_ids=positions).logits[:, -1].float()
            probs = torch.softmax(filter_logits(logits, temperature=temperature, top_k=top_k, top_p=top_p),
                                  dim=-1).cpu()
            picked = torch.cat([torch.multinomial(probs[g * k:(g + 1) * k], 1, generator=gen)
                                for g, gen in enumerate(generators)]).squeeze(-1).to(device)
            picked = torch.where(done, torch.full_like(picked, pad_id), picked)
            ids = torch.cat([ids, picked[:, None]], dim=1)
            mask = torch.cat([mask, (~done).long()[:, None]], dim=1)
            done |= picked == eos_id
    finally:
        model.train(was_training)
        if hasattr(model, "reshard"):  # FSDP2 keeps the root gathered after a forward without backward
            model.reshard()
    out: list[list[list[int]]] = []
    new = ids[:, width:].tolist()
    for g in range(len(prompts)):
        group = []
        for row in new[g * k:(g + 1) * k]:
            end = row.index(eos_id) + 1 if eos_id in row else len(row)
            group.append(row[:end])
        out.append(group)
    return out
