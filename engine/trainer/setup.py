"""Setting a team up: one record per agent, the seed, the models loaded and placed with their optimizers.

From agent records (:class:`engine.trainer.setup.AgentSetup`) to agent runtimes: the datasets
checked, each model and tokenizer loaded or adopted (an id is loaded once per agent, as CoMLRL does; the
same model object in several records shares its weights), ``model_config`` applied (dtype, model kwargs,
special tokens), devices, reference models, sampling copies and optimizers.

One agent as a trainer is given it (:class:`AgentSetup`), and CoMLRL's per-agent constructor
arguments turned into one such record per agent (:func:`comlrl_agents`).

CoMLRL passes a team as parallel lists (``agents``, ``tokenizer``, ``formatters``, ``agent_names``,
and CoopLab's ``agent_learning_rates``, ``agent_generation``, ``system_prompts``), each also
accepted as one value for everyone. Inside the engine an agent is one record: the run-config build
makes the records itself and hands them to a trainer as its ``agents``.

The run's seed: the config's, or, when the config gives none, one drawn from torch's global RNG.

CoMLRL has no seed setting: its runs continue torch's global RNG, so a script picks its run with
``torch.manual_seed(S)`` before ``train()``. CoopLab's config classes therefore default ``seed`` to
``None`` and then draw the run's seed from that RNG (:func:`draw_seed`): once when the trainer is
built, so it can step at once, and again when ``train()`` starts a fresh run, so a script that seeds
after building the trainer picks its run too. The global RNGs are left to continue (never reseeded);
the drawn seed seeds the trainer's own streams like a given one, is announced when training starts,
and is kept in checkpoints, so a resumed run continues with it. A given seed (every run config records
one) seeds everything (:func:`seed_everything`) and the run reproduces whatever the global RNG holds.

The streams a seed derives (:func:`generator_seed`, :func:`update_seed`, :func:`report_seed`) are
pure functions of it, so a trainer can seed them again in place when it draws its seed anew.

Trainable weights that still live in the checkpoint file's memory mapping get memory of their own.

``from_pretrained`` on a safetensors file whose dtype needs no conversion leaves each CPU weight
pointing into a private, copy-on-write mapping of the file. The first optimizer step then writes
every page of every trained weight, and each 4 KiB page costs a copy-on-write fault. Two agents
loaded from the same file fault on the same page-cache pages from two threads at once: on the
development machine the first AdamW step of two SmolLM2-135M agents took 1.3-1.6 s each (131,000
faults) against 0.08 s for the next one. :func:`own_mapped_weights` copies such weights into the
process's own memory while the trainer is built, one agent after another (about 0.15 s for
SmolLM2-135M), and leaves every other weight alone. The values are copied exactly; tied weights
are one parameter and stay one.

AdamW's state allocated when the optimizer is made, not inside the first ``step()``.

torch creates each parameter's moment buffers (two tensors the size of the weights) and step counter
lazily, in the first ``step()``: on a real model that first training step pays for allocating and
zeroing two extra copies of the trainable weights per agent (about 1 GB for SmolLM2-135M in float32),
and its time and memory jump. :func:`allocate_adam_state` creates exactly what torch would create
(same dtypes, devices, zeros), so every later step computes the same numbers bit for bit, and the
allocation happens while the trainer is built.
"""

from __future__ import annotations

import bisect
import copy
import random
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np
import torch

from engine.lora.adapters import frozen_base
from engine.schema.actor_critic_configs import ActorCriticConfig
from engine.schema.algorithms import TrainerConfig
from engine.trainer.agents import AgentRuntime, GenerationSettings, configured_rollout_dtype, rollout_copy_for
from engine.trainer.rollout import Formatter, default_formatter, normalize_formatters


def _own_or(own: Any, default: Any) -> Any:
    """An agent's own sampling setting, else the config's (``None``: not set)."""
    return default if own is None else own


def check_datasets(train_dataset: Any, eval_dataset: Any) -> int:
    """The number of training items; clear errors for a missing, empty or length-less dataset."""
    if train_dataset is None:
        raise ValueError("train_dataset is required (a list of dicts or a datasets.Dataset)")
    count = dataset_length(train_dataset, "train_dataset")
    if count == 0:
        raise ValueError("train_dataset is empty")
    if eval_dataset is not None:
        dataset_length(eval_dataset, "eval_dataset")
    return count


def dataset_length(dataset: Any, name: str) -> int:
    try:
        return len(dataset)
    except TypeError:
        raise ValueError(f"{name} must have a length (a list of dicts or a datasets.Dataset); "
                         f"streaming/iterable datasets are not supported") from None


def resolve_devices(config: TrainerConfig, num_agents: int) -> list[torch.device]:
    """Agent devices: ``mp`` places agent i on ``agent_devices[i]`` (one entry is broadcast);
    ``none`` puts everyone on the first listed device, else CUDA when available, else CPU."""
    devices = config.agent_devices
    if isinstance(devices, str):
        devices = [devices]
    if devices:
        if len(devices) not in (1, num_agents):
            raise ValueError(f"agent_devices: got {len(devices)} devices for {num_agents} agents (use 1 or N)")
        if config.parallel_training == "mp":
            return [torch.device(devices[i if len(devices) > 1 else 0]) for i in range(num_agents)]
        return [torch.device(devices[0])] * num_agents
    default = "cuda" if torch.cuda.is_available() else "cpu"
    return [torch.device(default)] * num_agents


def model_dtype(model_config: dict[str, Any] | None) -> Any:
    cfg = model_config or {}
    return cfg.get("torch_dtype", cfg.get("dtype"))


def load_agents(setups: Sequence[AgentSetup], config: TrainerConfig) -> list[AgentRuntime]:
    """Every agent's runtime from its record: the model and tokenizer loaded or adopted, placed on its
    device, its sampling settings and learning rate resolved against the config, and an optimizer."""
    from engine.models import load_agent

    devices = resolve_devices(config, len(setups))
    model_cfg = dict(config.model_config or {})
    dtype = model_dtype(model_cfg)
    model_kwargs = dict(model_cfg.get("model_kwargs") or {})
    special = model_cfg.get("special_tokens")
    placed: dict[int, torch.device] = {}
    runtimes: list[AgentRuntime] = []
    for i, setup in enumerate(setups):
        model, tokenizer = load_agent(setup.model, tokenizer=setup.tokenizer, device=devices[i], dtype=dtype,
                                      model_kwargs=model_kwargs)
        if isinstance(setup.model, torch.nn.Module):
            prev = placed.get(id(setup.model))
            if prev is not None and prev != devices[i]:
                raise ValueError(f"agents {setup.name!r} share a model object but are placed on {prev} and "
                                 f"{devices[i]}")
            placed[id(setup.model)] = devices[i]
        if special:
            tokenizer.add_special_tokens({"additional_special_tokens": list(special)})
            if len(tokenizer) > cast(torch.Tensor, model.get_input_embeddings().weight).shape[0]:
                model.resize_token_embeddings(len(tokenizer))
        gen = {"max_new_tokens": _own_or(setup.max_new_tokens, config.max_new_tokens),
               "temperature": _own_or(setup.temperature, config.temperature),
               "top_p": _own_or(setup.top_p, config.top_p), "top_k": _own_or(setup.top_k, config.top_k),
               # actor-critic configs have no fast_decode/decode_graphs: their defaults
               "fast_decode": True if isinstance(config, ActorCriticConfig) else config.fast_decode,
               "decode_graphs": "auto" if isinstance(config, ActorCriticConfig) else config.decode_graphs}
        runtimes.append(AgentRuntime(
            index=i, name=setup.name, model=model, tokenizer=tokenizer, device=devices[i],
            learning_rate=float(setup.learning_rate or config.agent_learning_rate),
            generation=GenerationSettings(**gen), formatter=setup.formatter, system_prompt=setup.system_prompt,
            logits_chunk_mib=config.logits_chunk_mib,
        ))
    _finish_models(runtimes, config)
    return runtimes


def _finish_models(runtimes: list[AgentRuntime], config: TrainerConfig) -> None:
    """Gradient checkpointing, reference and sampling copies (one per distinct model), optimizers,
    generators."""
    references: dict[int, Any] = {}
    rollout_copies: dict[int, Any] = {}
    engines: dict[int, Any] = {}
    ref_devices = config.reference_devices
    if isinstance(ref_devices, str):
        ref_devices = [ref_devices]
    for agent in runtimes:
        model = agent.model
        own_mapped_weights(agent.trainable_parameters())  # else the first step faults on every page it writes
        if config.gradient_checkpointing:
            enable = getattr(model, "activation_checkpointing_enable", None) or getattr(
                model, "gradient_checkpointing_enable", None)
            if enable is None:
                raise ValueError(f"gradient_checkpointing: agent {agent.name!r}'s model does not support it")
            enable()
            if frozen_base(model) is not None:  # frozen embeddings: let checkpointed blocks see a grad input
                model.enable_input_require_grads()
            if hasattr(model.config, "use_cache"):
                model.config.use_cache = False
        if config.reference_kl_enabled:
            if id(model) not in references and frozen_base(model) is not None and not ref_devices:
                references[id(model)] = frozen_base(model)  # a LoRA agent's untouched base: no copy
            if id(model) not in references:
                ref = copy.deepcopy(model)
                if ref_devices:
                    ref = ref.to(torch.device(ref_devices[agent.index if len(ref_devices) > 1 else 0]))
                ref.eval()
                ref.requires_grad_(False)
                references[id(model)] = ref
            agent.reference_model = references[id(model)]
        agent.rollout_copy = rollout_copy_for(model, configured_rollout_dtype(config), rollout_copies)
        agent.optimizer = make_adamw(agent.trainable_parameters(), lr=agent.learning_rate,
                                     weight_decay=config.weight_decay)
        allocate_adam_state(agent.optimizer)  # now, not in the first (timed) step
        if agent.rollout_copy is not None:
            agent.rollout_copy.watch(agent.optimizer)
        assert config.seed is not None  # the trainer's config carries its seed, given or drawn (seeded_config)
        agent.generator = torch.Generator(device=agent.device).manual_seed(generator_seed(config.seed, agent.index))
        agent.rollout_engine = _rollout_engine(agent, config, engines)


def _rollout_engine(agent: AgentRuntime, config: TrainerConfig, engines: dict[int, Any]) -> Any:
    """The agent's vLLM engine with ``rollout_backend: vllm`` (one per model object), else None."""
    if config.rollout_backend != "vllm":
        return None
    if agent.rollout_copy is not None:
        raise ValueError("rollout_backend: vllm samples in the model's own dtype; leave rollout_dtype empty")
    from engine.sampling.vllm_backend import rollout_engine_for

    assert config.seed is not None and agent.optimizer is not None  # set by load_agents before this call
    engine = rollout_engine_for(agent.model, agent.tokenizer, python_setting=config.vllm_python,
                                device=agent.device, seed=config.seed, engines=engines)
    engine.watch(agent.optimizer)
    return engine


_FUSED_DEVICES = {"cpu", "cuda", "mps", "xpu"}


def make_adamw(params: list[torch.nn.Parameter], *, lr: float, weight_decay: float) -> torch.optim.AdamW:
    """AdamW with torch's fused kernel where every parameter allows it (floating point, on a CPU or
    GPU): the same update, computed in one pass instead of ~10 ops per tensor (3x faster on small
    models; results agree with the per-tensor loop to rounding)."""
    fused = bool(params) and all(p.is_floating_point() and p.device.type in _FUSED_DEVICES for p in params)
    return torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay, fused=fused or None)


# -- One agent as a trainer is given it (:class:`AgentSetup`), and CoMLRL's per-agent constructor ------------
@dataclass(frozen=True)
class AgentSetup:
    """One agent before anything is loaded: what it is, how it is prompted, how it samples and learns.

    ``model`` is a model id or folder, or a loaded model (two records holding the same object share
    its weights, each agent keeping its own optimizer). The sampling settings and the learning rate
    left ``None`` are the config's (``max_new_tokens``, ``temperature``, ``top_p``, ``top_k``,
    ``agent_learning_rate``).
    """

    name: str
    model: Any
    tokenizer: Any = None  # None: loaded with a model id (a loaded model needs its tokenizer)
    formatter: Formatter = default_formatter
    system_prompt: str | None = None
    learning_rate: float | None = None
    max_new_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None


# the constructor arguments (CoMLRL's and CoopLab's) that describe the agents
COMLRL_AGENT_ARGUMENTS = ("agent_model", "agents", "num_agents", "tokenizer", "formatters", "agent_names",
                          "agent_learning_rates", "agent_generation", "system_prompts")


def comlrl_agents(
    config: Any, *, agent_model: Any, agents: Sequence[Any] | None, num_agents: int, tokenizer: Any,
    formatters: Any, agent_names: Sequence[str] | None, agent_learning_rates: Sequence[float | None] | None,
    agent_generation: Sequence[Mapping[str, Any] | None] | None, system_prompts: Sequence[str | None] | None,
) -> list[AgentSetup]:
    """The records for CoMLRL's arguments (see the module docstring). ``agents`` may already be
    :class:`AgentSetup` records; then every other per-agent argument stays unset."""
    if agents is not None and any(isinstance(a, AgentSetup) for a in agents):
        given = {"agent_model": agent_model, "tokenizer": tokenizer, "formatters": formatters,
                 "agent_names": agent_names, "agent_learning_rates": agent_learning_rates,
                 "agent_generation": agent_generation, "system_prompts": system_prompts}
        extra = [name for name, value in given.items() if value is not None]
        if extra or not all(isinstance(a, AgentSetup) for a in agents):
            raise ValueError(f"agents: AgentSetup records carry each agent's settings; pass only records, without "
                             f"{', '.join(extra) or 'other agents'}")
        agent_names_for([a.name for a in agents], config, len(agents))
        return list(agents)
    sources = resolve_sources(agent_model, agents, num_agents)
    n = len(sources)
    names = agent_names_for(agent_names, config, n)
    tokenizers = resolve_tokenizers(tokenizer, n)
    formatters = normalize_formatters(formatters, n)
    learning_rates = list(agent_learning_rates) if agent_learning_rates else [None] * n
    overrides = list(agent_generation) if agent_generation else [None] * n
    prompts = list(system_prompts) if system_prompts else [None] * n
    return [AgentSetup(name=names[i], model=sources[i], tokenizer=tokenizers[i], formatter=formatters[i],
                       system_prompt=prompts[i], learning_rate=learning_rates[i],
                       **{k: v for k, v in (overrides[i] or {}).items() if v is not None})
            for i in range(n)]


def agent_names_for(names: Sequence[str] | None, config: TrainerConfig, num_agents: int) -> list[str]:
    """Explicit names, else the config's, else ``agent_0..``; they must be distinct, one per agent."""
    chosen = list(names or config.agent_names or [f"agent_{i}" for i in range(num_agents)])
    if len(chosen) != num_agents or len(set(chosen)) != len(chosen):
        raise ValueError(f"agent_names must be {num_agents} distinct names, got {chosen}")
    return chosen


def resolve_sources(agent_model: Any, agents: Sequence[Any] | None, num_agents: int) -> list[Any]:
    """The list of per-agent model sources (ids or objects)."""
    if agents is not None:
        agents = list(agents)
        if not agents:
            raise ValueError("agents: the list is empty; pass one model (or id) per agent")
        if isinstance(agent_model, str) and any(isinstance(a, str) and a != agent_model for a in agents):
            raise ValueError("agent_model and agents disagree; pass only one of them")
        return agents
    if agent_model is None:
        raise ValueError("pass agent_model (a model id for every agent) or agents (one model or id per agent)")
    if not isinstance(agent_model, str):
        raise ValueError(
            "agent_model must be a model id or folder; to use loaded model objects pass agents=[...] "
            "(the same object several times shares its weights)"
        )
    if num_agents < 1:
        raise ValueError(f"num_agents must be >= 1, got {num_agents}")
    return [agent_model] * num_agents


def resolve_tokenizers(tokenizer: Any, num_agents: int) -> list[Any]:
    if isinstance(tokenizer, list | tuple):
        if len(tokenizer) != num_agents:
            raise ValueError(f"tokenizer: got {len(tokenizer)} tokenizers for {num_agents} agents")
        return list(tokenizer)
    return [tokenizer] * num_agents


# -- The run's seed: the config's, or, when the config gives none, one drawn from torch's global RNG ---------
SEED_LIMIT = 2**31 - 1  # drawn seeds stay below this: every derived seed fits torch's and NumPy's ranges


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (CPU and CUDA)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def draw_seed() -> int:
    """A run seed drawn from torch's global RNG (advancing it, as CoMLRL's sampling would)."""
    return int(torch.randint(0, SEED_LIMIT, (1,)).item())


def seeded_config(config: TrainerConfig) -> tuple[TrainerConfig, bool]:
    """``(config, drawn)``: ``config`` itself when it gives a seed, else a copy with a drawn seed (the
    caller's object keeps ``seed=None``, so it can configure another run that draws its own)."""
    if config.seed is not None:
        return config, False
    config = copy.copy(config)
    config.seed = draw_seed()
    return config, True


def generator_seed(seed: int, agent_index: int) -> int:
    """Agent ``agent_index``'s sampling generator."""
    return seed * 1000 + agent_index


def update_seed(seed: int, stream: int) -> int:
    """Update stream ``stream``'s mini-batch order (one per agent)."""
    return seed * 7919 + stream


def report_seed(seed: int) -> int:
    """Which episodes a step reports (and which joint actions its credit probes draw)."""
    return seed + 104729


def seed_note(seed: int) -> str:
    """The start-up line of a run whose config gave no seed."""
    return (f"seed: {seed}, drawn from torch's global RNG (the config gives none; as in CoMLRL, "
            f"torch.manual_seed before train() picks the run; set seed={seed} to repeat this one)")


# -- Trainable weights that still live in the checkpoint file's memory mapping get memory of their own -------
MAPS = Path("/proc/self/maps")


def file_mapped_ranges(maps_text: str) -> list[tuple[int, int]]:
    """The address ranges of ``/proc/<pid>/maps`` lines that map a file (a path in the sixth field;
    not ``[heap]``, ``[stack]`` or anonymous memory), sorted by start."""
    ranges = []
    for line in maps_text.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) < 6 or not fields[5].startswith("/"):
            continue
        start, end = (int(part, 16) for part in fields[0].split("-"))
        ranges.append((start, end))
    return sorted(ranges)


def in_ranges(address: int, ranges: list[tuple[int, int]]) -> bool:
    """Whether ``address`` lies in one of the sorted, non-overlapping ``ranges`` (end excluded)."""
    index = bisect.bisect_right(ranges, (address, float("inf"))) - 1
    return index >= 0 and ranges[index][0] <= address < ranges[index][1]


def own_mapped_weights(params: Iterable[torch.nn.Parameter], maps_text: str | None = None) -> int:
    """Copy every CPU parameter in ``params`` whose storage lies in a file mapping into memory of its
    own (``param.data`` replaced by an exact copy); returns the bytes copied. Nothing happens where
    ``/proc/self/maps`` cannot be read (other systems)."""
    if maps_text is None:
        try:
            maps_text = MAPS.read_text()
        except OSError:
            return 0
    ranges = file_mapped_ranges(maps_text)
    copied, seen = 0, set()
    for param in params:
        if id(param) in seen or param.device.type != "cpu" or param.numel() == 0:
            continue
        seen.add(id(param))
        if in_ranges(param.data_ptr(), ranges):
            param.data = param.data.clone()
            copied += param.numel() * param.element_size()
    return copied


# -- AdamW's state allocated when the optimizer is made, not inside the first ``step()`` ---------------------
def _step_counter(param: torch.Tensor, group: dict) -> torch.Tensor:
    """The ``step`` tensor torch's Adam/AdamW makes: on the parameter's device for fused or capturable
    groups (float32), else a CPU scalar of the default float dtype's precision."""
    if group.get("fused") or group.get("capturable"):
        return torch.zeros((), dtype=torch.float32, device=param.device)
    dtype = torch.float64 if torch.get_default_dtype() == torch.float64 else torch.float32
    return torch.tensor(0.0, dtype=dtype, device="cpu")


def allocate_adam_state(optimizer: torch.optim.Optimizer) -> None:
    """Create the lazily made state of every parameter of an Adam/AdamW ``optimizer`` that has none."""
    if not isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW):
        raise TypeError(f"allocate_adam_state: expected Adam or AdamW, got {type(optimizer).__name__}")
    for group in optimizer.param_groups:
        for param in group["params"]:
            state = optimizer.state[param]
            if state:
                continue
            state["step"] = _step_counter(param, group)
            state["exp_avg"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            state["exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
            if group.get("amsgrad"):
                state["max_exp_avg_sq"] = torch.zeros_like(param, memory_format=torch.preserve_format)
