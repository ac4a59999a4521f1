"""The resource budget of a run config: how much one step may sample, how long a run may repeat, how
many evaluation items and transcripts it may ask for, how long its names may be, and which devices
exist. Pure functions over a validated :class:`engine.schema.run_config.RunConfig` (torch-free): pre-flight calls
them before a run is stored (:func:`limit_problems`), the job executor again before it trains.

The sizes are upper bounds computed from the settings (early termination may sample less):

- a step samples at most ``items = max(items_per_step or 1, rollout_buffer_size)`` dataset items;
- per item, every agent samples ``K`` (``num_generations``) completions at each node of the rollout
  tree; a node has ``J`` joint actions (``K`` aligned, ``K^N`` cross for ``N`` trained agents) and
  each joint action of turn ``t < num_turns`` is a node of turn ``t + 1``, so the tree has
  ``nodes = 1 + J + ... + J^(T-1)`` nodes, ``K * nodes`` completions per agent and ``J * nodes``
  joint actions (team-reward evaluations) per item;
- tokens per step = ``items * N * K * nodes * max_new_tokens`` (the largest of the agents');
- a preference collection call samples ``items_per_step or 1`` items, each agent
  ``preference_num_candidates`` candidates (and the comparator ``comparator_num_candidates``) per turn;
- an evaluation samples ``eval_num_samples * eval_samples_per_item`` completions per agent and turn.

Each limit is an operator setting (``COOPLAB_MAX_*``, :data:`LIMIT_SETTINGS`), generous for real
research; a problem names the field, the size, the limit and both fixes.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from engine.permissions.write_paths import WriteArea, write_path_problems
from engine.schema.collaboration import is_centralized

if TYPE_CHECKING:
    from engine.schema.run_config import RunConfig

PREFERENCE_ALGORITHMS = ("madpo", "madpo_iter", "marlhf", "marlhf_iter")
MAX_SOURCE_CHARS = 4096
"""The longest model source, tokenizer, folder or URL a config may name (the OS's PATH_MAX)."""
MAX_TEXT_CHARS = 65_536
"""The longest free text (description, system prompt, prompt template): 64 Ki characters."""


@dataclass(frozen=True)
class Budget:
    """The limits a run config must fit; each field is the operator setting ``COOPLAB_<FIELD>``."""

    max_tokens_per_step: int = 100_000_000
    max_joint_actions_per_step: int = 1_000_000
    max_samples_per_node: int = 4096
    max_iterations: int = 1_000_000
    max_eval_samples: int = 100_000
    max_transcripts_per_step: int = 1000
    max_name_length: int = 128


LIMIT_SETTINGS = {name: f"COOPLAB_{name.upper()}" for name in Budget.__dataclass_fields__}
"""Each budget field's operator setting."""


@dataclass(frozen=True)
class RunLimits:
    """Everything pre-flight checks besides the models and the task: the budget, where the run may
    write (None: not checked), how many CUDA devices a job has (None: unknown here, the worker checks)
    and how to call the place the run will run in; with ``device_memory_bytes`` known, every agent's
    training must fit one device (:mod:`engine.schema.memory`)."""

    budget: Budget = field(default_factory=Budget)
    write_area: WriteArea | None = None
    cuda_devices: int | None = None
    device_place: str = "in the job"
    queue_sets_device: bool = False  # the job replaces trainer.device with its queue's device
    device_memory_bytes: int | None = None  # bytes of one training device; None: the memory fit is not checked


def _over(what: str, size: int | str, unit: str, limit_name: str, limit: int, lower: str) -> str:
    shown = f"{size:,}" if isinstance(size, int) else size
    return (f"{what} {shown} {unit}, over the limit of {limit:,}; {lower}, or have the operator raise "
            f"{LIMIT_SETTINGS[limit_name]}")


def _power(base: int, exponent: int, cap: int) -> int:
    """``base ** exponent``, or ``cap * cap + 1`` (far over any limit) when it is much larger than ``cap``."""
    if base <= 1 or exponent * math.log2(base) <= 2 * cap.bit_length() + 8:
        return base ** exponent
    return cap * cap + 1


def _geometric(j: int, turns: int, cap: int) -> int:
    """``1 + j + ... + j^(turns-1)`` (the nodes of a tree of ``turns`` levels), saturating like :func:`_power`."""
    if j <= 1:
        return max(turns, 0)
    top = _power(j, turns, cap)
    return top if top == cap * cap + 1 else (top - 1) // (j - 1)


def _max_new_tokens(config: RunConfig) -> int:
    overrides = [a.max_new_tokens for a in config.agents if a.max_new_tokens is not None]
    return max([config.trainer.max_new_tokens, *overrides])


def _trained_agents(config: RunConfig) -> int:
    return 1 if is_centralized(config.trainer.algorithm, config.trainer.collaboration_mode) else len(config.agents)


def sampling_problems(config: RunConfig, budget: Budget) -> list[tuple[str, str]]:
    """Samples per node, tokens and joint actions per step, preference candidates, evaluation items."""
    t, n, tokens = config.trainer, _trained_agents(config), _max_new_tokens(config)
    problems: list[tuple[str, str]] = []
    for name in ("num_generations", "preference_num_candidates", "comparator_num_candidates", "eval_samples_per_item"):
        value = getattr(t, name, None)
        if value is not None and value > budget.max_samples_per_node:
            problems.append((f"trainer.{name}", _over("asks for", value, "samples per agent and node",
                                                      "max_samples_per_node", budget.max_samples_per_node,
                                                      f"lower {name}")))
    k, turns = t.num_generations, t.num_turns
    items = max(t.items_per_step or 1, t.rollout_buffer_size)
    cap = max(budget.max_tokens_per_step, budget.max_joint_actions_per_step)
    joint = k if t.joint_mode != "cross" else _power(k, n, cap)
    nodes = _geometric(joint, turns, cap)
    huge = cap * cap + 1  # what a saturated power stands for

    def count(value: int) -> str:
        return f"{value:,}" if value < huge else f"more than {huge - 1:,}"

    step_tokens = items * n * k * nodes * tokens
    if step_tokens > budget.max_tokens_per_step:
        detail = f"({items:,} items x {n} agents x {count(k * nodes)} completions each x {tokens:,} max_new_tokens) ="
        problems.append(("trainer.num_generations", _over(f"a step samples up to {detail}", count(step_tokens), "tokens",
                                                          "max_tokens_per_step", budget.max_tokens_per_step,
                                                          "sample fewer or shorter completions (num_generations, "
                                                          "max_new_tokens, num_turns, items_per_step, "
                                                          "rollout_buffer_size)")))
    actions = items * joint * nodes
    if actions > budget.max_joint_actions_per_step:
        where = "trainer.joint_mode" if t.joint_mode == "cross" else "trainer.num_generations"
        shape = f"{k:,}^{n} cross" if t.joint_mode == "cross" else f"{k:,} aligned"
        fix = "use joint_mode 'aligned' or fewer" if t.joint_mode == "cross" else "use fewer"
        problems.append((where, _over(f"a step scores up to ({items:,} items x {shape} joint actions x {count(nodes)} "
                                      f"nodes over {turns:,} turn(s)) =", count(actions), "joint actions",
                                      "max_joint_actions_per_step", budget.max_joint_actions_per_step,
                                      f"{fix} num_generations or num_turns")))
    if t.algorithm in PREFERENCE_ALGORITHMS:
        candidates = t.preference_num_candidates + (t.comparator_num_candidates or t.preference_num_candidates)
        call = (t.items_per_step or 1) * n * candidates * turns * tokens
        if call > budget.max_tokens_per_step:
            problems.append(("trainer.preference_num_candidates", _over(
                f"a collection call samples up to ({t.items_per_step or 1:,} items x {n} agents x {candidates:,} "
                f"candidates with the comparator's x {turns:,} turn(s) x {tokens:,} max_new_tokens) =", call, "tokens",
                "max_tokens_per_step", budget.max_tokens_per_step,
                "lower preference_num_candidates, comparator_num_candidates, items_per_step or max_new_tokens")))
    if t.eval_num_samples > budget.max_eval_samples:
        problems.append(("trainer.eval_num_samples", _over("asks for", t.eval_num_samples, "evaluation items",
                                                           "max_eval_samples", budget.max_eval_samples,
                                                           "lower eval_num_samples")))
    elif t.eval_interval:
        evaluated = t.eval_num_samples * t.eval_samples_per_item * n * turns * tokens
        if evaluated > budget.max_tokens_per_step:
            problems.append(("trainer.eval_num_samples", _over(
                f"an evaluation samples up to ({t.eval_num_samples:,} items x {t.eval_samples_per_item} samples x "
                f"{n} agents x {turns:,} turn(s) x {tokens:,} max_new_tokens) =", evaluated, "tokens",
                "max_tokens_per_step", budget.max_tokens_per_step, "lower eval_num_samples or eval_samples_per_item")))
    return problems


ITERATION_SETTINGS = ("max_steps", "num_train_epochs", "num_iterations", "num_inner_epochs", "reward_num_train_epochs")


def count_problems(config: RunConfig, budget: Budget) -> list[tuple[str, str]]:
    """Repetition counts (steps, epochs, iterations, rounds) and transcripts per step."""
    t = config.trainer
    counts: list[tuple[str, int | None]] = [(f"trainer.{name}", getattr(t, name)) for name in ITERATION_SETTINGS]
    if config.system is not None:
        counts.append(("system.rounds", config.system.rounds))
    problems = [(where, _over("asks for", value, "repetitions", "max_iterations", budget.max_iterations,
                              f"lower {where.rsplit('.', 1)[1]}"))
                for where, value in counts if value is not None and value > budget.max_iterations]
    transcripts = [("trainer.transcripts_per_step", t.transcripts_per_step)]
    if config.system is not None:
        transcripts.append(("system.transcripts_per_round", config.system.transcripts_per_round))
    problems += [(where, _over("records", value, "episodes per step", "max_transcripts_per_step",
                               budget.max_transcripts_per_step, f"lower {where.rsplit('.', 1)[1]}"))
                 for where, value in transcripts if value > budget.max_transcripts_per_step]
    return problems


def _strings(config: RunConfig) -> Iterator[tuple[str, str | None, str]]:
    """``(field, value, kind)`` of every name, source and free text of a config."""
    yield "name", config.name, "name"
    yield "description", config.description, "text"
    for i, tag in enumerate(config.tags):
        yield f"tags.{i}", tag, "name"
    for i, agent in enumerate(config.agents):
        yield f"agents.{i}.name", agent.name, "name"
        yield f"agents.{i}.model", agent.model, "source"
        yield f"agents.{i}.tokenizer", agent.tokenizer, "source"
        yield f"agents.{i}.system_prompt", agent.system_prompt, "text"
        yield f"agents.{i}.prompt_template", agent.prompt_template, "text"
    t = config.trainer
    for name in ("comparator_model_name", "reward_model_name", "comparator_checkpoint", "comparator_api_url",
                 "policy_checkpoint_dir", "preference_replay_dir"):
        yield f"trainer.{name}", getattr(t, name, None), "source"
    for i, source in enumerate(t.comparator_agents or []):
        yield f"trainer.comparator_agents.{i}", source, "source"
    if config.system is not None:
        for g, group in enumerate(config.system.trainers):
            yield f"system.trainers.{g}.name", group.name, "name"


def length_problems(config: RunConfig, budget: Budget) -> list[tuple[str, str]]:
    """Names up to ``max_name_length`` characters, sources up to 4096, free text up to 64 Ki."""
    limits = {"name": budget.max_name_length, "source": MAX_SOURCE_CHARS, "text": MAX_TEXT_CHARS}
    problems = []
    for where, value, kind in _strings(config):
        if value is not None and len(value) > limits[kind]:
            fix = ("shorten it, or have the operator raise COOPLAB_MAX_NAME_LENGTH (at most 200, the store's width)"
                   if kind == "name" else "shorten it (a fixed limit)")
            problems.append((where, f"{len(value):,} characters, over the limit of {limits[kind]:,} characters for "
                                    f"a {kind}; {fix}"))
    return problems


_DEVICE = re.compile(r"^(cpu|mps|(cuda|xpu)(:\d{1,4})?)$")


def device_fields(config: RunConfig) -> list[tuple[str, str]]:
    """``(field, device)`` for every device a config names."""
    t = config.trainer
    found = [("trainer.device", t.device), ("trainer.reward_model_device", t.reward_model_device)]
    found += [(f"agents.{i}.device", a.device) for i, a in enumerate(config.agents)]
    lists = [("agent_devices", t.agent_devices), ("reference_devices", t.reference_devices),
             ("comparator_devices", t.comparator_devices),
             ("actor_critic.critic_devices", t.actor_critic.critic_devices)]
    found += [(f"trainer.{name}.{j}", d) for name, values in lists for j, d in enumerate(values or [])]
    return [(where, d) for where, d in found if d is not None]


def device_problems(config: RunConfig, cuda_devices: int | None, place: str = "in the job", *,
                    queue_sets_device: bool = False) -> list[tuple[str, str]]:
    """Each device must be ``cpu``, ``mps``, ``cuda[:N]`` or ``xpu[:N]``; with ``cuda_devices`` known,
    a CUDA device must be one of them (None: existence is not checked here). ``queue_sets_device``:
    ``trainer.device`` is replaced by the queue's device, so its existence is not checked."""
    problems = []
    for where, device in device_fields(config):
        shown = device if len(device) <= 40 else device[:40] + "..."
        if not _DEVICE.match(device):
            problems.append((where, f"{shown!r} is not a device; give cpu, cuda or cuda:N (or mps, xpu:N)"))
            continue
        if cuda_devices is None or not device.startswith("cuda") or (queue_sets_device and where == "trainer.device"):
            continue
        index = int(device.partition(":")[2] or 0)
        if index >= cuda_devices:
            have = ("no CUDA device" if cuda_devices == 0 else
                    f"{cuda_devices} CUDA device{'s' if cuda_devices > 1 else ''}: "
                    f"{', '.join(f'cuda:{i}' for i in range(min(cuda_devices, 8)))}")
            problems.append((where, f"{device} does not exist {place} ({have}); use "
                                    f"{'cpu' if cuda_devices == 0 else 'cuda:0'} or leave it empty"))
    return problems


def rank_problems(config: RunConfig, cuda_devices: int | None, place: str = "in the job") -> list[tuple[str, str]]:
    """A ``parallel_training: fsdp`` run on a GPU queue launches one rank per GPU: ``fsdp_ranks`` may not
    exceed the ``cuda_devices`` its job will see (None or 0: not a GPU queue, nothing to check; gloo ranks
    on the CPU take any number)."""
    ranks = config.trainer.fsdp_ranks
    if config.trainer.parallel_training != "fsdp" or not cuda_devices or not ranks or ranks <= cuda_devices:
        return []
    gpus = ",".join(str(i) for i in range(ranks))
    return [("trainer.fsdp_ranks", f"{ranks} ranks, one GPU each, but a job {place.removeprefix('in a job ')} has "
                                   f"{cuda_devices} GPU{'s' if cuda_devices > 1 else ''}; submit it to the queue of a "
                                   f"worker that owns at least {ranks} GPUs (`cooplab worker --device cuda:{gpus}`, "
                                   f"`cooplab submit --device cuda:{gpus}`), or set fsdp_ranks to at most "
                                   f"{cuda_devices} (empty: one rank per GPU of the queue)")]


def budget_problems(config: RunConfig, budget: Budget) -> list[tuple[str, str]]:
    """Every budget problem of ``config`` as ``(field, message)``: sizes, counts, lengths, device names."""
    return [*length_problems(config, budget), *sampling_problems(config, budget), *count_problems(config, budget),
            *device_problems(config, None)]


def limit_problems(config: RunConfig, limits: RunLimits) -> list[tuple[str, str]]:
    """Pre-flight's part: the budget, the devices (when their number is known) and the write folders."""
    problems = [*length_problems(config, limits.budget), *sampling_problems(config, limits.budget),
                *count_problems(config, limits.budget),
                *device_problems(config, limits.cuda_devices, limits.device_place,
                                 queue_sets_device=limits.queue_sets_device),
                *(rank_problems(config, limits.cuda_devices, limits.device_place) if limits.queue_sets_device else [])]
    if limits.write_area is not None:
        problems += write_path_problems(config.trainer, limits.write_area)
    return problems


def evaluation_problems(config: RunConfig, budget: Budget, *, items: int | None, samples: int | None,
                        greedy: bool) -> list[tuple[str, str]]:
    """The size of one evaluation of ``config``'s team (``cooplab eval --queue``, the dashboard's
    Evaluate): ``items`` of the split (None: the whole split, whose size is the task's) with
    ``samples`` joint answers each (None: the config's ``eval_samples_per_item``; one when
    ``greedy``). The answers per item against ``max_samples_per_node``, the items against
    ``max_eval_samples`` and ``items x samples x N x num_turns x max_new_tokens`` against
    ``max_tokens_per_step`` (per item of the split when ``items`` is None)."""
    t, n, tokens = config.trainer, _trained_agents(config), _max_new_tokens(config)
    given = 1 if greedy else samples if samples is not None else t.eval_samples_per_item
    where = "--samples" if samples is not None or greedy else "trainer.eval_samples_per_item"
    problems = []
    if given > budget.max_samples_per_node:
        fix = "lower --samples or evaluate --greedy" if where == "--samples" else "give a smaller --samples"
        problems.append((where, _over("asks for", given, "samples per item", "max_samples_per_node",
                                      budget.max_samples_per_node, fix)))
    if items is not None and items > budget.max_eval_samples:
        problems.append(("--items", _over("asks for", items, "evaluation items", "max_eval_samples",
                                          budget.max_eval_samples, "lower --items")))
    if problems:
        return problems
    sampled = (items or 1) * given * n * t.num_turns * tokens
    if sampled > budget.max_tokens_per_step:
        shape = f"{items:,} items" if items is not None else "each item of the split"
        problems.append(("--items" if items is not None else where, _over(
            f"an evaluation samples up to ({shape} x {given:,} samples x {n} agents x {t.num_turns:,} turn(s) x "
            f"{tokens:,} max_new_tokens) =", sampled, "tokens", "max_tokens_per_step", budget.max_tokens_per_step,
            "lower --items or --samples")))
    return problems
