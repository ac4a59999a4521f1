"""Where an iterative preference trainer's comparator candidates come from, beyond its own snapshots:
another model per agent, one centralized writer, an HTTP API (:mod:`engine.preference.comparators`).

A mixin of :class:`engine.preference.iterations.ComparatorIterations`; it reads the trainer's
``args``, ``agents``, ``collector`` and ``output_dir``.

* ``comparator_policy="model"`` with ``comparator_model_name`` (one model for every agent, loaded
  once) or ``comparator_agents`` (one per agent, or one for all): frozen models on
  ``comparator_devices`` (default: each agent's device), seeded generators of their own.
* ``comparator_policy="api"``: :class:`engine.preference.api_client.ApiClient`; the key is
  ``comparator_api_key`` or the one the variable ``comparator_api_key_env`` names holds, looked up
  when the trainer is built among the keys the process's owner handed over (the trainer's
  ``permissions``, :class:`engine.permissions.operator.OperatorPermissions`; a script that handed none: its own
  environment, as in CoMLRL). Where the operator's API hosts were set (``permissions.api_hosts``), the
  URL is checked against them before the key is read, and every request again.
* ``comparator_generation_mode="centralized"``: whichever comparator the policy picks, agent
  ``comparator_centralized_agent_index``'s model (or that ``comparator_agents`` entry) answers one
  joint prompt with every role's answer in ``<agent_i>`` sections.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import torch

from engine.permissions.operator import LIBRARY, OperatorPermissions
from engine.permissions.outbound import url_problem
from engine.preference.api_client import ApiClient
from engine.preference.api_settings import ApiSettings
from engine.preference.centralized import CentralizedCollaboration, TaggedCentralizedComparatorAdapter
from engine.preference.comparators import TextComparator, api_texts, centralized_texts, team_texts
from engine.rewards.team_reward import TeamReward
from engine.trainer.agents import AgentRuntime
from engine.trainer.rollout import TreeBuilder

if TYPE_CHECKING:
    from engine.preference.collect import PairCollector


class ComparatorSources:
    """The comparators that write text (see the module docstring)."""

    external_comparator: TextComparator | None = None  # another model / an API: the same every iteration
    if TYPE_CHECKING:  # set by the preference trainer it is mixed into (MADPOTrainer, MARLHFTrainer)
        args: Any
        agents: list[AgentRuntime]
        collector: PairCollector

    def _init_sources(self) -> None:
        cfg = self.args
        self.comparator_candidates = int(cfg.comparator_num_candidates or cfg.preference_num_candidates)
        self._writer_index = int(cfg.comparator_centralized_agent_index)
        self._collaboration: CentralizedCollaboration | None = None
        self._api_client: ApiClient | None = None
        self._api_requests_reported = 0
        adapter = getattr(self, "comparator_adapter", None)
        if adapter is not None and cfg.comparator_generation_mode != "centralized":
            raise ValueError("centralized_comparator_adapter: only comparator_generation_mode='centralized' reads it "
                             "(one comparator model writes every role); set it or leave the adapter out")
        if cfg.comparator_generation_mode == "centralized":
            self._collaboration = CentralizedCollaboration(
                adapter if adapter is not None else TaggedCentralizedComparatorAdapter(),
                [a.formatter for a in self.agents], self.collector.tree.reward, len(self.agents))
        if cfg.comparator_policy == "api":
            self._api_client = self._checked_api_client()
            source = api_texts(self._api_client, self.agents, self.comparator_candidates, self._collaboration,
                               self._writer_index)
            self.external_comparator = TextComparator(self.collector.tree, source, self.comparator_candidates)
        elif cfg.comparator_policy == "model" and (cfg.comparator_model_name or cfg.comparator_agents):
            runtimes = self._load_comparator_models()
            if self._collaboration is not None:
                self.external_comparator = self._centralized(runtimes)
            else:
                settings = dataclasses.replace(self.collector.tree.settings, samples_per_node=self.comparator_candidates)
                tree = TreeBuilder(runtimes, self.collector.tree.reward, None, settings)
                self.external_comparator = TextComparator(self.collector.tree, team_texts(tree),
                                                          self.comparator_candidates, samplers=runtimes)

    # -- the pieces --------------------------------------------------------------------------------
    def comparator_devices(self) -> list[torch.device | None]:
        """Each agent's comparator device (None: the agent's own)."""
        devices = self.args.comparator_devices
        n = len(self.agents)
        if not devices:
            return [None] * n
        if len(devices) not in (1, n):
            raise ValueError(f"comparator_devices: got {len(devices)} devices for {n} agents; give one for all or "
                             f"one per agent")
        return [torch.device(devices[0] if len(devices) == 1 else devices[i]) for i in range(n)]

    def comparator_runtime(self, agent: AgentRuntime, model: Any, device: torch.device | None) -> AgentRuntime:
        """``agent`` sampling with ``model`` (frozen, no optimizer); on another device it gets a seeded
        generator there (on its own device it shares the agent's)."""
        frozen = dataclasses.replace(agent, model=model, optimizer=None, reference_model=None, rollout_copy=None)
        if device is None or device == agent.device:
            return frozen
        return dataclasses.replace(frozen, device=device, generator=self._generator(device, agent.index))

    def _generator(self, device: Any, index: int) -> torch.Generator:
        """A comparator runtime's own generator on ``device``, seeded from the run seed and agent ``index``."""
        generator = torch.Generator(device=device).manual_seed(self.args.seed * 1000 + index + 7919)
        self.__dict__.setdefault("_seeded_generators", []).append((generator, index))
        return generator

    def reseed_comparator_generators(self, seed: int) -> None:
        """Seed the comparator's own generators again from ``seed`` (a run that draws its seed anew)."""
        for generator, index in self.__dict__.get("_seeded_generators", []):
            generator.manual_seed(seed * 1000 + index + 7919)

    def _centralized(self, agents: Sequence[AgentRuntime]) -> TextComparator:
        writer = agents[self._writer_index if len(agents) > 1 else 0]
        assert self._collaboration is not None  # asked only when comparator_generation_mode is centralized
        return TextComparator(self.collector.tree, centralized_texts(writer, self._collaboration,
                                                                     self.comparator_candidates),
                              self.comparator_candidates, samplers=[writer])

    def _load_comparator_models(self) -> list[AgentRuntime]:
        """Frozen comparator models, one runtime per agent (one when centralized); a source named for
        several agents is loaded once."""
        from engine.models import load_agent
        from engine.trainer.setup import model_dtype

        cfg, n = self.args, len(self.agents)
        sources = list(cfg.comparator_agents or [cfg.comparator_model_name])
        if len(sources) not in (1, n):
            raise ValueError(f"comparator_agents: got {len(sources)} models for {n} agents; give one for all or one "
                             f"per agent")
        wanted = [self._writer_index] if self._collaboration is not None else list(range(n))
        devices = self.comparator_devices()
        loaded: dict[tuple[str, str], tuple[Any, Any]] = {}
        runtimes: list[AgentRuntime] = []
        for i in wanted:
            agent, source = self.agents[i], sources[i if len(sources) > 1 else 0]
            device = devices[i] or agent.device
            key = (source, str(device))
            if key not in loaded:
                model, tokenizer = load_agent(source, device=device, dtype=model_dtype(cfg.model_config))
                loaded[key] = (model.eval().requires_grad_(False), tokenizer)
            model, tokenizer = loaded[key]
            runtimes.append(AgentRuntime(index=len(runtimes), name=agent.name, model=model, tokenizer=tokenizer,
                                         device=torch.device(device), learning_rate=0.0, generation=agent.generation,
                                         formatter=agent.formatter, system_prompt=agent.system_prompt,
                                         generator=self._generator(device, i)))
        return runtimes

    def _checked_api_client(self) -> ApiClient:
        """The API client; under the operator's API hosts, the URL is checked before the key is read."""
        cfg, hosts = self.args, self._permissions().api_hosts
        variable = None if cfg.comparator_api_key else cfg.comparator_api_key_env
        if hosts is not None:
            problem = url_problem(cfg.comparator_api_url or "", hosts, key_variable=variable,
                                  has_key=bool(cfg.comparator_api_key or variable))
            if problem:
                raise ValueError(f"comparator_api_url: {problem}")
        return ApiClient(ApiSettings.from_config(cfg, api_key=self._api_key()), hosts=hosts, key_variable=variable)

    def _permissions(self) -> OperatorPermissions:
        """The operator's permissions the trainer was built with (a script's: :data:`LIBRARY`)."""
        return getattr(self, "permissions", None) or LIBRARY

    def _api_key(self) -> str | None:
        cfg = self.args
        if cfg.comparator_api_key or not cfg.comparator_api_key_env:
            return cfg.comparator_api_key
        key = self._permissions().api_key(cfg.comparator_api_key_env)
        if not key:
            raise ValueError(f"comparator_api_key_env: the variable {cfg.comparator_api_key_env!r} is not set (or "
                             f"empty) in the training process's environment (a queued run's: the worker's); set it "
                             f"there, or leave comparator_api_key_env empty for an API without a key")
        return key

    def comparator_generators(self) -> list[torch.Generator]:
        """The comparator's own generators, in a fixed order (another model's first, then those of the
        snapshot copies on another device); one shared with an agent is saved with the agent's."""
        runtimes = list(self.external_comparator.samplers) if self.external_comparator is not None else []
        tree = getattr(self, "_comparator_tree", None)
        runtimes += list(tree.agents) if tree is not None else []
        shared = {id(a.generator) for a in self.agents}
        out: list[torch.Generator] = []
        for runtime in runtimes:
            g = runtime.generator
            if g is not None and id(g) not in shared and all(g is not o for o in out):
                out.append(g)
        return out

    def restore_comparator_generators(self, states: list[Any]) -> None:
        """Put back :meth:`comparator_generators`' states from a checkpoint (so a resumed run's comparator
        draws what the uninterrupted one's would)."""
        generators = self.comparator_generators()
        if len(states) != len(generators):
            raise ValueError(f"the checkpoint has {len(states)} comparator generator state(s), this trainer's "
                             f"comparator {len(generators)}: was it written with other comparator settings?")
        for generator, state in zip(generators, states, strict=True):
            generator.set_state(state)

    def label_pairs_with(self, reward: TeamReward) -> None:
        """Score the next collection's candidates (current and comparator) with ``reward``."""
        self.collector.tree.reward = reward
        if isinstance(self.collector.comparator_tree, TreeBuilder):
            self.collector.comparator_tree.reward = reward

    def comparator_metrics(self) -> dict[str, float]:
        """``comparator/unparsed_share`` (centralized: joint answers without any section) and
        ``comparator/api_requests`` (requests since the last report)."""
        metrics = {}
        if self._collaboration is not None:
            share = self._collaboration.take_unparsed_share()
            if share is not None:
                metrics["comparator/unparsed_share"] = share
        if self._api_client is not None:
            sent = self._api_client.requests_sent
            metrics["comparator/api_requests"] = float(sent - self._api_requests_reported)
            self._api_requests_reported = sent
        return metrics
