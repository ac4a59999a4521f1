"""From agent records (:class:`engine.trainer.agent_setup.AgentSetup`) to agent runtimes: the datasets
checked, each model and tokenizer loaded or adopted (an id is loaded once per agent, as CoMLRL does; the
same model object in several records shares its weights), ``model_config`` applied (dtype, model kwargs,
special tokens), devices, reference models, sampling copies and optimizers.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

import torch

from engine.lora.adapters import frozen_base
from engine.schema.catalog import CATALOG
from engine.schema.configs import MAGRPOConfig
from engine.trainer.agent_setup import AgentSetup
from engine.trainer.agents import AgentRuntime, GenerationSettings
from engine.trainer.mapped_weights import own_mapped_weights
from engine.trainer.optimizer_state import allocate_adam_state
from engine.trainer.rollout_copy import configured_rollout_dtype, rollout_copy_for
from engine.trainer.seeding import generator_seed

_GENERATION_KEYS = ("max_new_tokens", "temperature", "top_p", "top_k")


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


def resolve_devices(config: MAGRPOConfig, num_agents: int) -> list[torch.device]:
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


def load_agents(setups: Sequence[AgentSetup], config: MAGRPOConfig) -> list[AgentRuntime]:
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
            if len(tokenizer) > model.get_input_embeddings().weight.shape[0]:
                model.resize_token_embeddings(len(tokenizer))
        gen = {k: getattr(config, k) if getattr(setup, k) is None else getattr(setup, k) for k in _GENERATION_KEYS}
        gen["fast_decode"] = bool(getattr(config, "fast_decode", True))  # configs without the field: on
        gen["decode_graphs"] = str(getattr(config, "decode_graphs", "auto"))
        runtimes.append(AgentRuntime(
            index=i, name=setup.name, model=model, tokenizer=tokenizer, device=devices[i],
            learning_rate=float(setup.learning_rate or config.agent_learning_rate),
            generation=GenerationSettings(**gen), formatter=setup.formatter, system_prompt=setup.system_prompt,
            logits_chunk_mib=int(getattr(config, "logits_chunk_mib", CATALOG["logits_chunk_mib"].default)),
        ))
    _finish_models(runtimes, config)
    return runtimes


def _finish_models(runtimes: list[AgentRuntime], config: MAGRPOConfig) -> None:
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
        agent.generator = torch.Generator(device=agent.device).manual_seed(generator_seed(config.seed, agent.index))
        agent.rollout_engine = _rollout_engine(agent, config, engines)


def _rollout_engine(agent: AgentRuntime, config: MAGRPOConfig, engines: dict[int, Any]) -> Any:
    """The agent's vLLM engine with ``rollout_backend: vllm`` (one per model object), else None."""
    if getattr(config, "rollout_backend", "hf") != "vllm":
        return None
    if agent.rollout_copy is not None:
        raise ValueError("rollout_backend: vllm samples in the model's own dtype; leave rollout_dtype empty")
    from engine.sampling.vllm_backend import rollout_engine_for

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
