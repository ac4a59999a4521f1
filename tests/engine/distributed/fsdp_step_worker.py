"""One FSDP2 step of tiny agents on ``world`` gloo ranks (spawned here), and the same step in one process.

``python fsdp_step_worker.py OUT WORLD PORT`` (or :func:`main`) writes ``OUT/single.pt`` (both teams'
single-process step) and ``OUT/rank<r>.pt`` for each of the ``WORLD`` ranks (the parameters gathered
after the FSDP step, and the rank's local parameter and optimizer bytes). The teams: a tiny Llama and
a tiny Qwen2 (MAGRPO, the team's advantages shared by both agents, AdamW), and one tiny Llama (GRPO,
SGD with momentum: unlike AdamW's first step it moves with the gradient's scale). A fixed batch of 3
prompts x K=3 samples with fixed rewards: on two ranks the groups split 2 + 1, so the loss scale of
an uneven split is exercised. The sharded Qwen2 runs with activation checkpointing. ``mixed``: the GRPO
Llama sharded with bfloat16 compute, float32 reduction and CPU offload, against the float32 step.

Then a step with rollouts (``sampled*.pt``): each rank samples K completions of each of its prompts with
every agent (a generator per group), scores each joint action once, and updates; the single process
samples the same blocks of groups with the unsharded agents and updates once with all of them.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
import torch.multiprocessing as mp

from engine.distributed.fsdp import (
    Sample,
    agent_mesh,
    full_state,
    local_bytes,
    score_samples,
    shard_agent,
    update_step,
)
from engine.distributed.groups import group_advantages, rank_groups, rank_samples
from engine.distributed.rollouts import sample_groups
from engine.models.tiny import build_tiny_model

PROMPTS, K = 3, 3
MAX_GRAD_NORM = 1.0
"""Every update clips the whole gradient's norm to this (binding for the SGD teams, whose norm is about 14)."""
TEAMS = {"magrpo": [("llama", 11), ("qwen2", 12)], "grpo": [("llama", 21)], "mixed": [("llama", 21)],
         "kl": [("llama", 21)]}
KL_COEF, REFERENCE_SEED = 0.5, 31
"""``kl``: the GRPO Llama with the k3 KL to a reference (another tiny Llama, sharded alike) as a loss term."""
SAMPLED = ("magrpo", "grpo")
OPTIMIZERS = {"magrpo": lambda params: torch.optim.AdamW(params, lr=1e-2, weight_decay=0.01),
              "grpo": lambda params: torch.optim.SGD(params, lr=0.5, momentum=0.9),
              "mixed": lambda params: torch.optim.SGD(params, lr=0.5, momentum=0.9),
              "kl": lambda params: torch.optim.SGD(params, lr=0.5, momentum=0.9)}


def batch(vocab: int, seed: int) -> list[tuple[list[int], list[int]]]:
    """A fixed batch: PROMPTS prompts of different lengths, K completions each of different lengths."""
    g = torch.Generator().manual_seed(seed)
    rows = []
    for p in range(PROMPTS):
        prompt = torch.randint(3, vocab, (3 + p % 2,), generator=g).tolist()
        for k in range(K):
            rows.append((prompt, torch.randint(3, vocab, (2 + (p + k) % 3,), generator=g).tolist()))
    return rows


def team_rewards() -> list[float]:
    """One team reward per joint action (sample k of every agent), computed once."""
    return [float((i * 7) % 5) - 1.5 for i in range(PROMPTS * K)]


def build(team: str):
    agents = []
    for arch, seed in TEAMS[team]:
        model, tokenizer = build_tiny_model(arch, "xs", seed=seed)
        agents.append((model.float().train(), tokenizer))
    return agents


def step(team: str, world: int, rank: int) -> dict:
    agents = build(team)
    rows = range(PROMPTS * K) if world == 1 else rank_samples(PROMPTS, K, world, rank)
    rewards = team_rewards()
    # the group baseline needs the whole group: this rank's groups are whole by construction
    advantages = group_advantages([rewards[i] for i in rows], K)
    out: dict = {"params": [], "bytes": [], "configs": [model.config.to_dict() for model, _ in agents]}
    for a, (model, tokenizer) in enumerate(agents):
        if world > 1:  # the second agent recomputes its layers' activations in the backward
            shard_agent(model, agent_mesh(), checkpointing=a == 1, mixed_precision=team == "mixed",
                        cpu_offload=team == "mixed")
        optimizer = OPTIMIZERS[team](model.parameters())
        data = batch(model.config.vocab_size, 100 + a)
        samples = [Sample(*data[i], advantage) for i, advantage in zip(rows, advantages, strict=True)]
        kl_coef = 0.0
        if team == "kl":  # the reference's log-probs of the rank's samples, from its shards
            reference = build_tiny_model("llama", "xs", seed=REFERENCE_SEED)[0].float().eval().requires_grad_(False)
            if world > 1:
                shard_agent(reference, agent_mesh())
            for sample, ref in zip(samples, score_samples(reference, samples, tokenizer.pad_token_id), strict=True):
                sample.ref_logps = ref
            out["ref_logps"] = [r.tolist() for r in (s.ref_logps for s in samples) if r is not None]
            kl_coef = KL_COEF
        _, norm = update_step(model, optimizer, samples, total_rows=PROMPTS * K, world=world,
                              pad_id=tokenizer.pad_token_id, max_grad_norm=MAX_GRAD_NORM, kl_coef=kl_coef)
        out.setdefault("norms", []).append(norm)
        out["bytes"].append(local_bytes(model, optimizer))
        out["params"].append(full_state(model))
        out.setdefault("dtypes", []).append(sorted({str(p.dtype) for p in model.parameters()}))
    return out


MAX_NEW = 6


def team_reward(team: list[list[int]]) -> float:
    """A deterministic team reward of one joint action (one completion per agent)."""
    return float(sum(sum(c) + 3 * len(c) for c in team) % 7) - 3.0


def sampled_step(team: str, world: int, rank: int, split: int) -> dict:
    """Sample the rank's groups on the (sharded) agents, score each joint action once, update. With
    ``world`` 1 the groups are sampled in the ``split`` blocks the ranks of a ``split``-rank run hold,
    so each batch has the same shape as a rank's, then all are updated in one step."""
    agents = build(team)
    if world > 1:
        for a, (model, _) in enumerate(agents):
            shard_agent(model, agent_mesh(), checkpointing=a == 1)
    blocks = [rank_groups(PROMPTS, split, r) for r in range(split)] if world == 1 else [
        rank_groups(PROMPTS, world, rank)]
    prompts = [p for p, _ in batch(agents[0][0].config.vocab_size, 7)[::K]]
    completions: dict[int, list[list[list[int]]]] = {}  # group -> agent -> K completions
    for block in blocks:
        per_agent = [sample_groups(model, [prompts[g] for g in block], K, max_new_tokens=MAX_NEW,
                                   seeds=[1000 + 100 * a + g for g in block], eos_id=tokenizer.eos_token_id,
                                   pad_id=tokenizer.pad_token_id)
                     for a, (model, tokenizer) in enumerate(agents)]
        for i, g in enumerate(block):
            completions[g] = [per_agent[a][i] for a in range(len(agents))]
    groups = sorted(completions)
    rewards = [team_reward([completions[g][a][k] for a in range(len(agents))]) for g in groups for k in range(K)]
    advantages = group_advantages(rewards, K)
    out: dict = {"completions": completions, "rewards": len(rewards), "params": []}
    for a, (model, tokenizer) in enumerate(agents):
        optimizer = OPTIMIZERS[team](model.parameters())
        samples = [Sample(prompts[g], completions[g][a][k], advantages[i * K + k])
                   for i, g in enumerate(groups) for k in range(K)]
        _, norm = update_step(model, optimizer, samples, total_rows=PROMPTS * K, world=world,
                              pad_id=tokenizer.pad_token_id, max_grad_norm=MAX_GRAD_NORM)
        out.setdefault("norms", []).append(norm)
        out["params"].append(full_state(model))
    return out


def _rank(rank: int, world: int, folder: str, port: str) -> None:
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        torch.save({team: step(team, world, rank) for team in TEAMS}, Path(folder) / f"rank{rank}.pt")
        torch.save({team: sampled_step(team, world, rank, world) for team in SAMPLED},
                   Path(folder) / f"sampled{rank}.pt")
    finally:
        dist.destroy_process_group()


def main(folder: str, world: int, port: str, start_method: str = "spawn") -> None:
    """``start_method`` "fork" (the test's): the ranks start from this process with torch, transformers
    and the engine already imported, where spawned ranks import them anew (the test file took 28.7 s of
    CPU time with spawned ranks, 14.1 s with forked ones). Each rank computes on one torch thread, set
    before anything else, so none uses an OpenMP thread pool its parent may have had."""
    torch.set_num_threads(1)
    torch.save({team: step(team, 1, 0) for team in TEAMS}, Path(folder) / "single.pt")
    torch.save({team: sampled_step(team, 1, 0, world) for team in SAMPLED}, Path(folder) / "sampled.pt")
    mp.start_processes(_rank, args=(world, folder, port), nprocs=world, join=True, start_method=start_method)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]), sys.argv[3])
