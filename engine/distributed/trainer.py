"""The MAGRPO trainer with every agent sharded over the ranks of a ``torch.distributed`` launch
(``parallel_training: fsdp``; ``cooplab train`` starts the ranks with torchrun, docs/gpu.md).

Each rank builds the whole team, then :class:`FSDPMAGRPOTrainer` shards each agent's model over every
rank (:func:`engine.distributed.fsdp.shard_agent`; bfloat16 compute on a GPU) and gives it a new AdamW
over its shards. A step: every rank takes the step's items (the same seeded order as any run), keeps
its block of whole groups (:func:`engine.distributed.groups.rank_groups`), grows and scores their trees
with the trainer's own tree builder (each agent samples through
:func:`engine.distributed.rollouts.sample_groups`, which runs the same number of collective forwards on
every rank, each group from a generator seeded by the run's seed, the step and the group's place in
the step: a group's samples do not depend on the ranks), computes the group advantages where the group
is (one team reward per joint action, as in any run), and takes one optimizer step per agent per turn
(:func:`engine.distributed.fsdp.update_step`, the loss scaled so FSDP's mean of the ranks' gradients is
the whole batch's; ``max_grad_norm`` clips the whole gradient's norm over every rank, reported as
``agent/<name>/grad_norm`` as the MAGRPO trainer reports it). With ``num_turns`` > 1 the trees grow
through every turn on the rank that holds their items, each later node seeded by its item, turn and
place (:meth:`FSDPMAGRPOTrainer._level_seeds`). With ``reference_kl_enabled`` each agent's
frozen reference copy is sharded like the agent, each rank scores its samples' log-probs under the
policy and the reference (one collective forward each), and the k3 KL enters the reward
(``reference_kl_mode: reward``, through the trainer's own advantages) or the loss (``loss``); its
step mean over every rank is ``agent/<name>/kl``. The scored trees are then gathered on every rank, so the metrics and the reported
transcripts are the whole step's (the sink reports them on rank 0 only, :mod:`engine.distributed.sink`).

Without a process group it runs the same step in one process, unsharded (``fsdp_ranks`` 1 or empty; more
is refused, naming the launch): the reference that a run on
several ranks equals (tests/engine/distributed/test_fsdp_launch.py). Checkpoints are sharded
(``torch.distributed.checkpoint``, :mod:`engine.distributed.checkpoint`: each rank writes its shards,
nothing is gathered whole) and resume at any world size; the final models are gathered to rank 0 and
written as plain Hugging Face folders. What :mod:`engine.schema.fsdp_rules` refuses is not built.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist

from engine.distributed.checkpoint import DCP_DIR, load_sharded, save_sharded, whole_weights
from engine.distributed.fsdp import Sample, agent_mesh, full_state, score_samples, shard_agent, update_step
from engine.distributed.groups import rank_groups
from engine.distributed.rollouts import sample_groups
from engine.sampling.sampler import decode_completions
from engine.schema.folders import atomic_folder
from engine.schema.fsdp_rules import fsdp_problems, one_update_problem
from engine.sinks.base import Episode
from engine.trainer.agents import AgentRuntime, SampledPrompt
from engine.trainer.core import step_timing
from engine.trainer.losses import lr_factor
from engine.trainer.magrpo import MAGRPOTrainer, agent_batch, fill_advantages, set_learning_rates
from engine.trainer.reporting import branch_episodes, choose_branches, rollout_metrics
from engine.trainer.rollout import Rollout, assign_returns, joint_action_indices
from engine.trainer.setup import make_adamw

STATE_FILE = "training_state.pt"


def world_and_rank() -> tuple[int, int]:
    """``(world size, rank)`` of the default process group; ``(1, 0)`` without one."""
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def group_seed(seed: int, step: int, group: int, agent: int) -> int:
    """The seed of one group's samples: a function of the run's seed, the step, the group's place in
    the step's items and the agent, never of the rank that holds it."""
    return (seed * 1_000_003 + step * 10_007 + group * 101 + agent) % (2**62)


class FSDPMAGRPOTrainer(MAGRPOTrainer):
    """MAGRPO with each agent sharded over the launch's ranks (see the module docstring)."""

    shards_agents = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        cfg = self.args
        self.world, self.rank = world_and_rank()
        models = [agent.model for agent in self.agents]
        problems = fsdp_problems(cfg, algorithm="magrpo", shared_models=len({id(m) for m in models}) < len(models),
                                 lora=[hasattr(m, "peft_config") for m in models],
                                 has_eval=self.eval_dataset is not None,
                                 world=self.world if dist.is_available() and dist.is_initialized() else None)
        widest = len(joint_action_indices(cfg.joint_mode, len(self.agents), cfg.num_generations)) ** (cfg.num_turns - 1)
        problem = one_update_problem(self.items_per_update, cfg.effective_train_batch_size, self.world,
                                     nodes_per_item=widest)
        if problems:
            raise ValueError(problems[0])
        if not (dist.is_available() and dist.is_initialized()) and (cfg.fsdp_ranks or 1) > 1:
            raise ValueError(f"trainer.fsdp_ranks: {cfg.fsdp_ranks} ranks, but this process is no rank of a launch (no "
                             "torch.distributed process group): start the run with cooplab train or submit it to a "
                             "worker, which launch the ranks with torchrun (docs/gpu.md), or set fsdp_ranks: 1 to "
                             "train in one process")
        if problem:
            raise ValueError(problem)
        self._group_seeds: list[int] = []
        self._levels = [0] * len(self.agents)  # each agent's sampling calls in this step: its turn
        for agent in self.agents:
            if self.world > 1:  # gradient_checkpointing was turned on by the team's setup
                mesh = agent_mesh(None, agent.device.type)
                options = {"mixed_precision": agent.device.type == "cuda", "cpu_offload": bool(cfg.fsdp_cpu_offload)}
                shard_agent(agent.model, mesh, **options)
                if agent.reference_model is not None:  # reference_kl_enabled: the frozen copy, sharded alike
                    shard_agent(agent.reference_model, mesh, **options)
            agent.optimizer = make_adamw(agent.trainable_parameters(), lr=agent.learning_rate,
                                         weight_decay=cfg.weight_decay)
            agent.sample = self._sampler(agent)  # type: ignore[method-assign]

    def _sampler(self, agent: AgentRuntime) -> Any:
        def sample(prompts: list[str], num_generations: int, *, greedy: bool = False) -> tuple[list[SampledPrompt], int]:
            if greedy:
                raise ValueError("parallel_training: fsdp samples; greedy decoding (evaluation) is not built yet")
            tok = agent.tokenizer
            ids = [list(p) for p in tok(list(prompts), add_special_tokens=True)["input_ids"]]
            g = agent.generation
            turn = self._levels[agent.index]
            self._levels[agent.index] += 1
            groups = sample_groups(agent.model, ids, num_generations, max_new_tokens=g.max_new_tokens,
                                   seeds=[s + agent.index for s in self._level_seeds(turn, len(ids))],
                                   eos_id=int(tok.eos_token_id),
                                   pad_id=agent.pad_id, temperature=g.temperature, top_p=g.top_p, top_k=g.top_k)
            out = [SampledPrompt(p, c, decode_completions(tok, c)) for p, c in zip(ids, groups, strict=True)]
            return out, sum(len(c) for group in groups for c in group)

        return sample

    def _level_seeds(self, turn: int, prompts: int) -> list[int]:
        """The seeds of a turn's prompts (the nodes of that level, item after item, each item's nodes in
        the tree's order): turn 0 has one node per item, seeded by :func:`group_seed`; a later turn's node
        adds its turn and its place among its item's nodes, so no seed depends on the ranks."""
        items = len(self._group_seeds)
        if not items or prompts % items:
            raise ValueError(f"turn {turn}: {prompts} prompts for {items} items; under parallel_training: fsdp every "
                             "item has as many nodes per turn (no early termination)")
        per = prompts // items
        return [(self._group_seeds[p // per] + 1_000_033 * turn + 7_919 * (p % per)) % (2**62) for p in range(prompts)]

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        cfg, agents = self.args, self.agents
        started = time.perf_counter()
        indices = self.items_for_step(self.step)
        mine = rank_groups(len(indices), self.world, self.rank)
        local = [indices[i] for i in mine]
        self._group_seeds = [group_seed(cfg.seed, self.step, i, 0) for i in mine]
        self._levels = [0] * len(agents)
        rollout = self.tree.build([dict(self.train_dataset[i]) for i in local], local)
        assign_returns(rollout, cfg.discount)
        updating = time.perf_counter()
        batches = [agent_batch(agent.index, [rollout]) for agent in agents]
        if cfg.reference_kl_enabled:  # the policy's and the reference's log-probs: one forward each per rank
            for agent, batch in zip(agents, batches, strict=True):
                plain = [Sample(s.prompt_ids, s.completion_ids, 0.0) for s in batch.samples]
                olds = score_samples(agent.model, plain, agent.pad_id)
                refs = score_samples(agent.reference_model, plain, agent.pad_id)
                for sample, old, ref in zip(batch.samples, olds, refs, strict=True):
                    sample.old_logps, sample.ref_logps = old, ref
        for batch in batches:
            fill_advantages(batch, [rollout], cfg)  # the KL penalty in the reward, when reference_kl_mode: reward
        kl_coef = cfg.reference_kl_coef if cfg.reference_kl_enabled and cfg.reference_kl_mode == "loss" else 0.0
        factor = lr_factor(self.step, warmup_steps=cfg.warmup_steps, total_steps=self.total_steps,
                           schedule=cfg.lr_scheduler)
        set_learning_rates(agents, factor)
        # one optimizer step per agent per turn, as the MAGRPO trainer's mini-batches never mix turns; each
        # over the turn's samples of every rank (their count summed over the ranks)
        turns = cfg.num_turns
        rows = torch.tensor([[sum(1 for s in b.samples if s.turn == t) for t in range(turns)] for b in batches],
                            dtype=torch.float64)
        if self.world > 1:
            dist.all_reduce(rows)
        losses, norms = [], []
        for agent, batch in zip(agents, batches, strict=True):
            assert agent.optimizer is not None  # set in __init__
            agent_losses, agent_norms = [], []
            for t in range(turns):
                samples = [Sample(s.prompt_ids, s.completion_ids, s.advantage, s.ref_logps)
                           for s in batch.samples if s.turn == t]
                loss_value, norm = update_step(agent.model, agent.optimizer, samples,
                                               total_rows=int(rows[agent.index, t]), world=self.world,
                                               pad_id=agent.pad_id, loss_type=cfg.loss_type,
                                               max_grad_norm=cfg.max_grad_norm, kl_coef=kl_coef)
                agent_losses.append(loss_value)
                agent_norms.append(norm)  # the whole gradient's norm before clipping, the same on every rank
            losses.append(sum(agent_losses) / turns)
            norms.append(sum(agent_norms) / turns)
        self.step += 1
        ended = time.perf_counter()
        rollouts = self._gathered(rollout)
        loss = torch.tensor(losses, dtype=torch.float64)
        # each agent's KL to its reference over the whole step: the ranks' sums and counts
        kl = torch.tensor([[sum(b.kl or ()), len(b.kl or ())] for b in batches], dtype=torch.float64)
        if self.world > 1:
            dist.all_reduce(loss)  # each rank's loss is scaled: their sum / world is the whole batch's mean
            if cfg.reference_kl_enabled:
                dist.all_reduce(kl)
        metrics = rollout_metrics(rollouts, cfg.num_turns)
        for agent, value, norm in zip(agents, (loss / self.world).tolist(), norms, strict=True):
            metrics[f"agent/{agent.name}/loss"] = value
            metrics[f"agent/{agent.name}/grad_norm"] = norm
            if cfg.reference_kl_enabled:
                metrics[f"agent/{agent.name}/kl"] = float(kl[agent.index, 0] / kl[agent.index, 1].clamp_min(1))
            metrics[f"agent/{agent.name}/lr"] = agent.learning_rate * factor
        metrics.update(step_timing(started, updating, ended, tokens=sum(r.num_tokens for r in rollouts),
                                   generate_s=max(r.timings["generate_s"] for r in rollouts),
                                   reward_s=max(r.timings["reward_s"] for r in rollouts)))
        metrics["train/epoch"] = self.epoch_of_last_step()
        metrics["perf/ranks"] = float(self.world)
        self.env_step += sum(r.env_steps for r in rollouts)
        branches = choose_branches(rollouts, cfg.transcripts_per_step, self.report_rng)
        return metrics, branch_episodes(branches, self.agent_names)

    def _gathered(self, rollout: Rollout) -> list[Rollout]:
        """Every rank's scored rollout, in rank order (= the step's item order), on every rank."""
        if self.world == 1:
            return [rollout]
        out: list[Any] = [None] * self.world
        dist.all_gather_object(out, rollout)
        return out

    # -- whole weights, gathered (collective: every rank calls these) --------------------------------
    def _full_states(self) -> list[dict[str, torch.Tensor]]:
        return [full_state(agent.model) for agent in self.agents]

    def save_checkpoint(self, path: str | Path) -> Path:
        """A sharded checkpoint (:mod:`engine.distributed.checkpoint`): every rank writes its shards of the
        team's weights and optimizer states into ``<path>/dcp/``, rank 0 the counters and generators
        (``training_state.pt``) and ``meta.json``; the folder appears whole (rank 0's temporary folder,
        renamed once every rank wrote). Every rank returns rank 0's path."""
        with contextlib.ExitStack() as stack:
            folder = stack.enter_context(atomic_folder(path, "checkpoint")) if self.rank == 0 else None
            shared: list[Any] = [str(folder) if folder is not None else None]
            if self.world > 1:
                dist.broadcast_object_list(shared, src=0)
            save_sharded(Path(shared[0]) / DCP_DIR, self.agents, distributed=self.world > 1)
            if self.world > 1:
                dist.barrier()  # every rank's shards written before the folder is renamed into place
            if folder is not None:
                state = self._training_state()
                state.pop("optimizers")  # in the shards
                torch.save(state, folder / STATE_FILE)
                meta = {"step": self.step, "env_step": self.env_step, "agent_names": self.agent_names,
                        "world": self.world, "config": self.args.to_dict()}
                (folder / "meta.json").write_text(json.dumps(meta, default=str), encoding="utf-8")
        target: list[Any] = [str(path)]
        if self.world > 1:
            dist.broadcast_object_list(target, src=0)  # rank 0's checkpoint folder: the one the others report
            dist.barrier()
        return Path(target[0])

    def load_checkpoint(self, path: str | Path) -> None:
        """Resume from a sharded checkpoint saved at any world size: the shards are read into this
        launch's sharding, then rank 0's counters and generators are restored on every rank."""
        folder = Path(path)
        load_sharded(folder / DCP_DIR, self.agents, distributed=self.world > 1)
        state = torch.load(folder / STATE_FILE, weights_only=False)
        optimizers = [agent.optimizer for agent in self.agents]
        assert all(o is not None for o in optimizers), "every FSDP agent has an optimizer (built in __init__)"
        state["optimizers"] = [o.state_dict() for o in optimizers if o is not None]  # loaded above
        self._restore_training_state(state)
        self.last_checkpoint = str(folder)

    def save_model(self, output_dir: str | Path) -> None:
        """Each agent as a plain Hugging Face folder ``agent_<i>/`` (written by rank 0)."""
        states = self._full_states()
        if self.rank == 0:
            for agent, state in zip(self.agents, states, strict=True):
                folder = Path(output_dir) / f"agent_{agent.index}"
                save_plain(agent.model, state, folder)
                agent.tokenizer.save_pretrained(folder)
        if self.world > 1:
            dist.barrier()


def save_plain(model: Any, state: dict[str, torch.Tensor], folder: Path) -> None:
    """``model``'s config and ``state`` (whole, unsharded) as a Hugging Face folder."""
    from safetensors.torch import save_file

    folder.mkdir(parents=True, exist_ok=True)
    model.config.save_pretrained(folder)
    save_file({k: v.contiguous() for k, v in state.items()}, str(folder / "model.safetensors"))


def final_weights(folder: str | Path) -> Sequence[dict[str, torch.Tensor]]:
    """The whole weights of an FSDP checkpoint folder, one dict per agent (read in this process)."""
    return whole_weights(Path(folder) / DCP_DIR)
