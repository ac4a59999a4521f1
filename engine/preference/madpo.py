"""``MADPOTrainer``: multi-agent DPO on preference pairs labelled by the team reward (CoMLRL's
constructor, ``train()``/``evaluate()``/``save_model()``), on the shared trainer core.

``train()`` first collects the pairs (once per run, resumable), then runs the DPO steps:

    for each chunk of items_per_step items:            # collection, batched across items
        every agent samples preference_num_candidates completions per item (one call per agent)
        the joint candidates get team rewards; pairs with a positive gap are selected
    for step in range(num_train_epochs * ceil(P / train_batch_size)):
        a batch of pairs (seeded order per epoch)
        every agent's margin d_i = log pi_i(winner) - log pi_i(loser), no grad
        per agent: loss_i = -log sigmoid(beta * (d_i + stopgrad(sum_j!=i d_j) [- sum_j d_j^ref]))
                   backward, clip, AdamW step
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch

from engine.preference.collect import PairCollector
from engine.preference.joint_policy import CentralizedRoles, centralize, unread_adapter_problem
from engine.preference.loss import agent_dpo_loss, pair_statistics
from engine.preference.pairs import PreferencePair
from engine.rewards.team_reward import TeamReward
from engine.schema.preference_configs import MADPOConfig, MARLHFConfig
from engine.sinks.base import BaseSink, Episode, Sink, TurnRecord
from engine.trainer.core import TrainerCore, TrainResult, step_timing, train_trainer
from engine.trainer.evaluation import EvalOutcome, evaluate, evaluate_items
from engine.trainer.losses import NO_GRAD_CHUNK, lr_factor, reduce_tokens
from engine.trainer.magrpo import MAGRPOTrainer
from engine.trainer.rollout import RolloutSettings, TreeBuilder
from engine.trainer.setup import COMLRL_AGENT_ARGUMENTS, comlrl_agents
from engine.trainer.threads import agent_threads

# CoMLRL's MADPOTrainer subclasses its MAGRPOTrainer: the constructor takes the same arguments
_CONSTRUCTOR = inspect.signature(MAGRPOTrainer.__init__)


class MADPOTrainer(CentralizedRoles, TrainerCore):
    """Multi-agent direct preference optimisation (see the module docstring).

    The constructor is :class:`engine.trainer.MAGRPOTrainer`'s: CoMLRL's arguments up to ``args``
    (``external_transition`` is accepted and unused: MADPO is single-turn), then the keyword-only
    ``sink``, ``agent_names``, ``agent_learning_rates``, ``agent_generation``, ``system_prompts``,
    ``eval_check`` and ``output_dir``. With ``collaboration_mode="centralized"`` one model writes
    every role (``centralized_adapter``, the arguments as :class:`CentralizedMAGRPOTrainer` takes
    them) and the pairs compare its joint completions; the pairs' transcripts show the joint turn
    and then each role's part, and the first step reports ``centralized/unparsed_share`` of the
    collection.
    """

    def __init__(self, *args: Any, centralized_adapter: Any = None, **kwargs: Any) -> None:
        given = _CONSTRUCTOR.bind(self, *args, **kwargs)
        explicit_roles = "num_agents" in given.arguments
        given.apply_defaults()
        a = dict(given.arguments)
        config = a["args"]
        if config is not None and not hasattr(config, "dpo_beta"):
            raise ValueError(f"args: MADPOTrainer takes a MADPOConfig, got {type(config).__name__}")
        unread_adapter_problem(config if config is not None else self._default_config(), centralized_adapter)
        if isinstance(config, MADPOConfig | MARLHFConfig) and config.collaboration_mode == "centralized":  # one model writes every role
            self.collaboration, self.role_names = centralize(a, config, centralized_adapter,
                                                             explicit_roles=explicit_roles, role_check=self._role_check)
        self.reward = TeamReward(a["reward_func"], a["reward_processor"])  # checked before models load
        self.eval_check = a["eval_check"]
        cfg = self._configured(a["args"], a["model_config"])
        team = comlrl_agents(cfg, **{k: a[k] for k in COMLRL_AGENT_ARGUMENTS})
        self._setup(cfg, team, train_dataset=a["train_dataset"], eval_dataset=a["eval_dataset"],
                    external_transition=None,  # single-turn: a CoMLRL script's transition is unused
                    eval_logger=a["eval_logger"], eval_aggregator=a["eval_aggregator"], sink=a["sink"],
                    wandb_config=a["wandb_config"], output_dir=a["output_dir"])
        self.reward_func = self.reward.reward_func
        self._pool = agent_threads(cfg.parallel_training, [agent.device for agent in self.agents],
                                   [agent.model for agent in self.agents])
        self.tree = TreeBuilder(self.agents, self.reward, None, RolloutSettings(
            samples_per_node=cfg.preference_num_candidates, num_turns=1, joint_mode=cfg.joint_mode,
            turn_order=cfg.turn_order, early_termination_threshold=None,
            external_prompt_passthrough=cfg.external_prompt_passthrough,
        ), pool=self._pool)  # None for agents sharing a model
        self._schedule(1, update_streams=1)
        self.collector = PairCollector(self.tree, self.train_dataset, self.num_train_items,
                                       selection=cfg.pair_selection, limit=cfg.preference_pairs_per_sample,
                                       items_per_chunk=cfg.items_per_step or 1, seed=cfg.seed)
        self._pair_schedule()

    __init__.__signature__ = _CONSTRUCTOR  # type: ignore[attr-defined]

    def _default_config(self) -> MADPOConfig:
        return MADPOConfig()

    # -- the run -----------------------------------------------------------------------------------
    def train(self, resume_from_checkpoint: str | Path | None = None, checkpoint_dir: str | Path | None = None,
              checkpoint_interval: int | None = None, checkpoint_total_limit: int | None = None, *,
              sink: Sink | None = None) -> TrainResult:
        """Collect the pairs (continuing a resumed collection), then the DPO steps through the shared
        loop: evaluation, reports, checkpoints and stopping as for every trainer."""
        self._settle_seed(resuming=resume_from_checkpoint is not None)
        if resume_from_checkpoint is not None:
            self.load_checkpoint(resume_from_checkpoint)
        self.collect_pairs(sink=sink or self.sink or BaseSink())
        return train_trainer(self, None, checkpoint_dir, checkpoint_interval, checkpoint_total_limit, sink=sink)

    def _reseed(self, seed: int) -> None:
        super()._reseed(seed)
        self.collector.reseed(seed)

    def collect_pairs(self, *, sink: Sink | None = None) -> list[PreferencePair]:
        """Sample, score and pair the candidates of every training item not collected yet
        (:class:`engine.preference.collect.PairCollector`). Stops early, resumably, when ``sink``
        asks; raises when a finished collection found no pair at all."""
        cfg = self.args

        def measure(new: list[PreferencePair], rollout: Any) -> None:
            if not cfg.reference_free:
                self._reference_margins(new)
            if not cfg.use_environment_step:
                self.env_step += rollout.env_steps

        if self.collaboration is not None:
            self.collaboration.take_unparsed_share()  # count the collection's joint completions only
        try:
            if self.collector.collect(sink.should_stop if sink is not None else lambda: False, measure):
                self._pair_schedule()
        except ValueError as exc:
            if self.collaboration is None or not str(exc).startswith("no preference pair"):
                raise
            raise ValueError(f"{exc}{self._unparsed_hint()}") from None
        if self.collaboration is not None:
            self.collection_unparsed_share = self.collaboration.take_unparsed_share()
        return self.pairs

    def _unparsed_hint(self) -> str:
        """Why a centralized collection may have found no pair: completions the protocol could not split."""
        assert self.collaboration is not None  # asked only of a centralized collection (collect_pairs)
        share = self.collaboration.take_unparsed_share()
        if not share:
            return ""
        return (f". {share:.0%} of the joint completions had no tagged section, so every role's answer was empty "
                f"and they all scored alike: use a model that writes the <agent_i> sections, or a task protocol "
                f"that always splits (the quickstart task's centralized_protocol: halves)")

    @property
    def pairs(self) -> list[PreferencePair]:
        return self.collector.pairs

    @property
    def collected_items(self) -> int:
        return self.collector.collected_items

    def _pair_schedule(self) -> None:
        """``train_batch_size`` pairs per step; an epoch is one pass over the pairs."""
        cfg = self.args
        self.steps_per_epoch = max(1, math.ceil(len(self.pairs) / cfg.effective_train_batch_size))
        self.total_steps = cfg.max_steps or cfg.num_train_epochs * self.steps_per_epoch

    def pair_order(self, epoch: int, count: int | None = None) -> list[int]:
        """The order of ``count`` pairs (default: all) in an epoch: a seeded permutation (a pure
        function of seed, epoch and count)."""
        gen = torch.Generator().manual_seed(self.args.seed * 1_000_003 + epoch + 17)
        return torch.randperm(len(self.pairs) if count is None else count, generator=gen).tolist()

    def pairs_for_step(self, step: int) -> list[PreferencePair]:
        epoch, pos = divmod(step, self.steps_per_epoch)
        size = self.args.effective_train_batch_size
        return [self.pairs[i] for i in self.pair_order(epoch)[pos * size:(pos + 1) * size]]

    def train_step(self) -> tuple[dict[str, float], list[Episode]]:
        """One DPO step on the step's pairs; the first step also reports the collection."""
        cfg = self.args
        started = time.perf_counter()
        batch = self.pairs_for_step(self.step)
        metrics = self.update(batch)
        self.step += 1
        if cfg.use_environment_step:
            self.env_step += cfg.environment_steps_per_pair * len(batch)
        metrics.update(step_timing(started, started, time.perf_counter(), generate_s=0.0, reward_s=0.0, tokens=0))
        metrics["train/reward_mean"] = sum(p.candidate_reward_mean for p in batch) / len(batch)
        metrics["turn_1/reward_mean"] = metrics["train/reward_mean"]
        metrics["train/epoch"] = self.epoch_of_last_step()
        if self.step == 1:
            metrics.update(self.collector.metrics())
            if self.collection_unparsed_share is not None:
                metrics["centralized/unparsed_share"] = self.collection_unparsed_share
        chosen = self.report_rng.sample(batch, min(cfg.transcripts_per_step, len(batch)))
        return metrics, self._pair_episodes(chosen)

    def _pair_episodes(self, pairs: Sequence[PreferencePair]) -> list[Episode]:
        """:func:`pair_episodes`; for one joint model each side also shows the roles after the joint
        turn (:meth:`CentralizedRoles.role_turns`)."""
        episodes = pair_episodes(pairs, self.agent_names)
        if self.collaboration is None:
            return episodes
        out = []
        for episode in episodes:
            item = dict(self.train_dataset[pairs[episode.sample_index // 2].item_index])
            joint = episode.turns[0]
            out.append(dataclasses.replace(episode, turns=(joint, *self.role_turns(item, joint))))
        return out

    # -- evaluation: MAGRPO's (engine.trainer.evaluation) -----------------------------------------
    def evaluate(self, num_eval_samples: int | None = None, *, greedy: bool | None = None,
                 samples_per_item: int | None = None, sink: Sink | None = None) -> dict[str, float]:
        """``eval/...`` metrics on the first ``num_eval_samples`` eval items
        (:func:`engine.trainer.evaluation.evaluate`)."""
        return evaluate(self, num_eval_samples, greedy=greedy, samples_per_item=samples_per_item, sink=sink)

    def evaluate_items(self, dataset: Any, count: int, *, greedy: bool | None = None,
                       samples_per_item: int | None = None, split: str = "eval") -> EvalOutcome | None:
        """Every item's outcome on the first ``count`` items of ``dataset``
        (:func:`engine.trainer.evaluation.evaluate_items`)."""
        return evaluate_items(self, dataset, count, greedy=greedy, samples_per_item=samples_per_item, split=split)

    # -- the update --------------------------------------------------------------------------------
    def update(self, batch: Sequence[PreferencePair]) -> dict[str, float]:
        """Every agent's DPO step on ``batch``: partners' margins are measured once, before any agent
        moves, so every agent optimises the same joint preference. Returns the metrics."""
        cfg = self.args
        deltas = torch.stack([self.margins(agent, batch) for agent in self.agents])  # (N, B)
        reference = None if cfg.reference_free else torch.tensor(
            [p.reference_deltas for p in batch], dtype=torch.float32).T  # (N, B)
        metrics = pair_statistics(deltas, cfg.dpo_beta, reference)
        metrics["dpo/reward_gap_mean"] = sum(p.reward_gap for p in batch) / len(batch)
        metrics["dpo/num_pairs"] = float(len(batch))
        factor = lr_factor(self.step, warmup_steps=cfg.warmup_steps, total_steps=self.total_steps,
                           schedule=cfg.lr_scheduler)
        micro = max(1, (cfg.micro_batch_size or 2 * len(batch)) // 2)  # two sequences per pair
        for agent in self.agents:
            optimizer = agent.optimizer
            assert optimizer is not None  # every trained agent has one (engine.trainer.setup.load_agents)
            for group in optimizer.param_groups:
                group["lr"] = agent.learning_rate * factor
            agent.model.train()
            optimizer.zero_grad(set_to_none=True)
            loss_value = 0.0
            for start in range(0, len(batch), micro):
                chunk = slice(start, start + micro)
                own = self.margins(agent, batch[chunk], grad=True)  # (b,)
                loss = agent_dpo_loss(own, deltas[:, chunk], agent.index, cfg.dpo_beta,
                                      None if reference is None else reference[:, chunk])
                if not torch.isfinite(loss):
                    raise FloatingPointError(f"agent {agent.name!r}: the DPO loss is {float(loss.detach())} "
                                             f"(non-finite); lower agent_learning_rate or dpo_beta")
                weight = len(batch[chunk]) / len(batch)
                (loss * weight).backward()
                loss_value += float(loss.detach()) * weight
            norm = float(torch.nn.utils.clip_grad_norm_(agent.trainable_parameters(),
                                                        cfg.max_grad_norm or float("inf")))
            if not math.isfinite(norm):
                raise FloatingPointError(f"agent {agent.name!r}: the gradient norm is {norm} (non-finite)")
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)
            prefix = f"agent/{agent.name}/"
            metrics.update({prefix + "loss": loss_value, prefix + "grad_norm": norm,
                            prefix + "lr": agent.learning_rate * factor,
                            prefix + "margin_mean": float(deltas[agent.index].mean()),
                            prefix + "response_len": sum(len(p.winner_ids[agent.index]) + len(p.loser_ids[agent.index])
                                                         for p in batch) / (2 * len(batch))})
        return metrics

    def margins(self, agent: Any, pairs: Sequence[PreferencePair], *, grad: bool = False,
                model: Any = None) -> torch.Tensor:
        """``log pi(winner) - log pi(loser)`` of ``agent`` for each pair (B,): one padded forward over
        winners and losers together; without ``grad`` in chunks, in eval mode, on the CPU."""
        if grad:
            return self._margin_forward(agent, pairs, agent.model)
        model = agent.model if model is None else model
        was_training = model.training
        model.eval()
        try:
            with torch.no_grad():
                step = max(1, NO_GRAD_CHUNK // 2)
                parts = [self._margin_forward(agent, pairs[s:s + step], model).float().cpu()
                         for s in range(0, len(pairs), step)]
        finally:
            model.train(was_training)
        return torch.cat(parts) if parts else torch.zeros(0)

    def _margin_forward(self, agent: Any, pairs: Sequence[PreferencePair], model: Any) -> torch.Tensor:
        i = agent.index
        packed = agent.pack([p.prompt_ids[i] for p in pairs] + [p.loser_prompt_ids[i] for p in pairs],
                            [p.winner_ids[i] for p in pairs] + [p.loser_ids[i] for p in pairs])
        logps, _ = agent.forward_logprobs(packed, model=model)
        seq = reduce_tokens(logps, packed.completion_mask, self.args.loss_type)  # (2B,)
        return seq[:len(pairs)] - seq[len(pairs):]

    def _reference_margins(self, pairs: list[PreferencePair]) -> None:
        """The frozen reference's margins: collection ends before the first update, so the models
        are still the initial policy and no reference copy is kept."""
        if not pairs:
            return
        per_agent = [self.margins(agent, pairs).tolist() for agent in self.agents]
        for b, pair in enumerate(pairs):
            pair.reference_deltas = [per_agent[i][b] for i in range(self.num_agents)]

    # -- checkpoints -------------------------------------------------------------------------------
    def _training_state(self) -> dict[str, Any]:
        return {**super()._training_state(), "preference": self.collector.state()}

    def _restore_training_state(self, state: dict[str, Any]) -> None:
        super()._restore_training_state(state)
        self.collector.restore(state["preference"])
        self._pair_schedule()

    def close(self) -> None:
        """Stop the per-agent sampling threads (``mp`` mode)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None
            self.tree.pool = None


def pair_episodes(pairs: Sequence[PreferencePair], names: Sequence[str]) -> list[Episode]:
    """Each pair as two episodes, winner then loser: every agent's prompt and completion with the
    team reward; the advantage column holds the signed reward gap (+ winner, - loser)."""
    episodes = []
    for n, pair in enumerate(pairs):
        for side, (prompts, texts, reward, sign) in enumerate((
                (pair.prompts, pair.winner_completions, pair.winner_reward, 1.0),
                (pair.loser_prompts, pair.loser_completions, pair.loser_reward, -1.0))):
            turns = tuple(TurnRecord(turn=1, agent_index=i, agent_name=names[i], prompt=prompts[i],
                                     completion=texts[i], reward=reward, ret=reward, advantage=sign * pair.reward_gap)
                          for i in range(len(names)))
            episodes.append(Episode(sample_index=2 * n + side, split="train", item_index=pair.item_index, turns=turns))
    return episodes
