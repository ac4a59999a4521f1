"""What ``parallel_training: fsdp`` trains today, and a refusal naming the fix for everything else.
Pure (torch-free): the run-config build (:mod:`engine.schema.configure`) lists these refusals at their
fields, and :class:`engine.distributed.trainer.FSDPMAGRPOTrainer` raises the first one.

Built: the MAGRPO family (magrpo, grpo and its baselines) with one turn or several (no early
termination), aligned joint actions, group credit, one optimizer step per agent per turn, no ratio
clipping, gradient clipping by the whole gradient's norm and the reference KL (in the reward or the
loss, the reference sharded like its agent), every agent whole in its own model (no shared weights, no
LoRA), sharded over every rank of the launch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.schema.configs import MAGRPOConfig
    from engine.schema.run_config_types import TrainerSpec

FAMILY = ("magrpo", "grpo", "mareinforce", "maremax", "marloo")


def fsdp_problems(cfg: TrainerSpec | MAGRPOConfig, *, algorithm: str = "magrpo", lora: Sequence[bool] = (),
                  shared_models: bool = False, has_eval: bool = False, world: int | None = None) -> list[str]:
    """Every ``field: message`` refusing ``cfg`` (a run config's TrainerSpec, or a MAGRPO-family config) under
    ``parallel_training: fsdp``; empty when the FSDP trainer runs it. ``world``: the launch's ranks
    when known (the trainer's check), None at config time."""
    if cfg.parallel_training != "fsdp":
        return []
    out: list[str] = []

    def no(field: str, why: str, fix: str) -> None:
        out.append(f"trainer.{field}: {why} is not built under parallel_training: fsdp yet; {fix} "
                   "(docs/gpu.md, 'Agents larger than one GPU')")

    if algorithm not in FAMILY:
        no("algorithm", f"{algorithm!r}", f"use one of {', '.join(FAMILY)}, or parallel_training auto/mp")
    if any(lora):
        no("parallel_training", "LoRA (an agent's lora_rank)", "remove lora_rank (FSDP trains full weights) or "
           "use parallel_training auto/mp with LoRA")
    if shared_models:
        no("parallel_training", "parameter sharing (one model for several agents)",
           "give each agent its own model, or use parallel_training auto")
    if cfg.agent_devices and len(set(cfg.agent_devices)) > 1:
        no("agent_devices", "mp and fsdp together (a device per agent)", "leave agent_devices empty: each rank "
           "holds a shard of every agent on its own device")
    if cfg.num_turns != 1 and cfg.early_termination_threshold is not None:
        no("early_termination_threshold", "early termination of a tree (every rank samples every turn: its "
           "forwards are collective)", "leave early_termination_threshold empty, or set num_turns: 1")
    if cfg.joint_mode != "aligned":
        no("joint_mode", f"{cfg.joint_mode!r}", "set joint_mode: aligned")
    if cfg.turn_order not in ("simultaneous", None):
        no("turn_order", f"{cfg.turn_order!r}", "set turn_order: simultaneous")
    if cfg.credit_assignment not in ("group", None):
        no("credit_assignment", f"{cfg.credit_assignment!r}", "set credit_assignment: group")
    if cfg.clip_epsilon is not None:
        no("clip_epsilon", "ratio clipping", "leave clip_epsilon empty (gradient clipping, max_grad_norm, is "
           "trained under fsdp)")
    if cfg.reference_kl_enabled and cfg.reference_devices:
        no("reference_devices", "a reference model on devices of its own", "leave reference_devices empty: each "
           "rank holds a shard of every agent's reference on its own device")
    if cfg.num_inner_epochs != 1:
        no("num_inner_epochs", "more than one inner epoch", "set num_inner_epochs: 1")
    if cfg.micro_batch_size is not None:
        no("micro_batch_size", "micro-batches", "leave micro_batch_size empty")
    if cfg.rollout_backend != "hf":
        no("rollout_backend", f"{cfg.rollout_backend!r}", "set rollout_backend: hf")
    if cfg.rollout_dtype not in (None, "auto"):
        no("rollout_dtype", "a rollout copy", "leave rollout_dtype empty")
    if cfg.credit_samples:
        no("credit_samples", "credit probes", "set credit_samples: 0")
    if has_eval and cfg.eval_interval:
        no("eval_interval", "evaluation during training", "set eval_interval: 0")
    ranks = cfg.fsdp_ranks
    if world is not None and ranks is not None and ranks != world:
        no("fsdp_ranks", f"sharding over {ranks} of the launch's {world} ranks",
           f"launch {ranks} ranks (torchrun --nproc_per_node={ranks}) or set fsdp_ranks: {world}")
    return out


def one_update_problem(items_per_update: int, train_batch_size: int, world: int, *,
                       nodes_per_item: int = 1) -> str | None:
    """The refusal of a step the FSDP trainer cannot take in one optimizer step per agent per turn on every
    rank: fewer items than ranks (a rank with no group), or more nodes in a turn than one mini-batch holds
    (``nodes_per_item``: an item's nodes in its widest turn, the last)."""
    if items_per_update < world:
        return (f"trainer.rollout_buffer_size: a step of {items_per_update} items cannot give each of {world} ranks "
                f"a group; give at least {world} items per step (rollout_buffer_size / items_per_step)")
    nodes = items_per_update * nodes_per_item
    if train_batch_size < nodes:
        return (f"trainer.train_batch_size: {train_batch_size} nodes per mini-batch split a turn of {nodes} nodes "
                f"({items_per_update} items) into several optimizer steps, not built under parallel_training: fsdp "
                f"yet; set train_batch_size >= {nodes}")
    return None
