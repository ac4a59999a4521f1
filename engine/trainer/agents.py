"""An agent at run time (:class:`AgentRuntime`): sampling, log-probs, each agent's work on the team's
worker threads (:func:`map_agents`; the threads are :mod:`engine.trainer.threads`), and the copy of its
weights it may sample from (:class:`RolloutCopy`, ``rollout_dtype``; the last section).

One agent at training time: its model, tokenizer, optimizer, device, sampling settings, and the
two model calls the trainer makes (batched sampling, and padded log-prob forwards).

Several agents may hold the *same* model object (parameter sharing): each still has its own AdamW
over those parameters, so the weights and gradient buffers exist once while the optimizer moments
are per agent.
"""

from __future__ import annotations

import copy
import logging
import sys
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from engine.lora.adapters import is_lora
from engine.sampling import sampler
from engine.schema.algorithms import POLICY_GRADIENT_CONFIGS, TrainerConfig
from engine.schema.catalog import CATALOG
from engine.trainer.losses import (
    LinearHead,
    head_logprobs,
    linear_head,
    logits_chunk_rows,
    token_entropy,
    token_logprobs,
)
from engine.trainer.threads import split_cpu_threads


@dataclass
class GenerationSettings:
    """Sampling settings of one agent (defaults come from the config)."""

    max_new_tokens: int
    temperature: float
    top_p: float
    top_k: int | None
    fast_decode: bool = True  # Llama-family tokens through the fast step of engine.sampling.decoder (identical logits)
    decode_graphs: Literal["auto", "on", "off"] = "auto"  # the static token loop of engine.sampling.static_decode


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
    prefix: SharedPrompts | None = None  # set when rows share prompts (the K samples of a node)


@dataclass
class SharedPrompts:
    """The distinct prompts of a batch, once each, and which of them every row continues."""

    prompt_ids: torch.Tensor  # (G, Lp) left-padded
    prompt_mask: torch.Tensor  # (G, Lp)
    position_ids: torch.Tensor  # (G, Lp)
    row_prompt: torch.Tensor  # (B,) index into the G prompts
    repeats: int | None = None  # K when the rows are K copies of prompt 0, then K of prompt 1, ...

    def gather(self, per_prompt: torch.Tensor) -> torch.Tensor:
        """Rows of ``per_prompt`` (G, ...) for each of the B rows. Contiguous equal groups (the
        usual layout: a node's K samples in a row) expand instead of indexing, so the backward is a
        plain sum rather than an indexed accumulation (atomic, hence unordered, on CUDA)."""
        if self.repeats is not None:
            g = per_prompt.shape[0]
            return per_prompt.unsqueeze(1).expand(g, self.repeats, *per_prompt.shape[1:]).reshape(
                g * self.repeats, *per_prompt.shape[1:])
        return per_prompt.index_select(0, self.row_prompt)


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
    rollout_copy: RolloutCopy | None = None  # the sampling copy with rollout_dtype (below), else None
    rollout_engine: Any = None  # engine.sampling.vllm_backend.VLLMRollout with rollout_backend vllm, else None
    extra: dict[str, Any] = field(default_factory=dict)
    logits_chunk_mib: int = CATALOG["logits_chunk_mib"].default  # see engine.trainer.losses

    @property
    def pad_id(self) -> int:
        pad = self.tokenizer.pad_token_id
        return int(pad if pad is not None else self.tokenizer.eos_token_id)

    def trainable_parameters(self) -> list[torch.nn.Parameter]:
        return [p for p in self.model.parameters() if p.requires_grad]

    # -- sampling -------------------------------------------------------------------------------
    def sample(self, prompts: list[str], num_generations: int, *,
               greedy: bool = False) -> tuple[list[SampledPrompt], int]:
        """One batched sampling call over all prompts and all K samples. Returns per-prompt samples
        and the number of generated completion tokens."""
        if self.rollout_engine is not None and self.rollout_engine.serves(self.model):
            gen = self.rollout_engine.generate(
                prompts, num_generations=num_generations, max_new_tokens=self.generation.max_new_tokens,
                temperature=self.generation.temperature, top_p=self.generation.top_p, top_k=self.generation.top_k,
                do_sample=not greedy, generator=self.generator)
            return unpack_generation(gen, len(prompts), num_generations)
        gen = sampler.generate_completions(
            self.sampling_model(),
            self.tokenizer,
            prompts,
            num_generations=num_generations,
            max_new_tokens=self.generation.max_new_tokens,
            temperature=self.generation.temperature,
            top_p=self.generation.top_p,
            top_k=self.generation.top_k,
            do_sample=not greedy,
            generator=self.generator,
            fast_decode=self.generation.fast_decode,
            decode_graphs=self.generation.decode_graphs,
        )
        return unpack_generation(gen, len(prompts), num_generations)

    def sampling_model(self) -> Any:
        """The model the agent samples from: its weights, or their ``rollout_dtype`` copy refreshed."""
        return self.model if self.rollout_copy is None else self.rollout_copy.refreshed()

    # -- log-probs --------------------------------------------------------------------------------
    def pack(self, prompt_ids: list[list[int]], completion_ids: list[list[int]]) -> SequenceBatch:
        """Left-pad prompts and right-pad completions so every completion starts at the same column."""
        return pack_sequences(prompt_ids, completion_ids, pad_id=self.pad_id, device=self.device)

    def forward_logprobs(self, batch: SequenceBatch, *, model: Any = None,
                         with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Token log-probs of the completions (B, T) from one padded forward, plus optional entropy.

        When the float32 logits would exceed ``logits_chunk_mib`` (:meth:`logits_plan`), they are
        computed from the final hidden states a chunk of positions at a time and never held whole."""
        model = self.model if model is None else model
        t = batch.completion_ids.shape[1]
        plan = self.logits_plan(model, batch)
        if plan is not None:
            head, rows = plan
            return head_logprobs(completion_hidden(model, batch, t), head, batch.completion_ids, rows=rows,
                                 with_entropy=with_entropy)
        logits = completion_logits(model, batch, t)
        logps = token_logprobs(logits, batch.completion_ids)
        entropy = None
        if with_entropy:
            with torch.no_grad():
                entropy = token_entropy(logits.detach())
        return logps, entropy

    def logits_plan(self, model: Any, batch: SequenceBatch) -> tuple[LinearHead, int] | None:
        """The output layer and positions per chunk when ``batch``'s float32 logits under ``model`` would
        exceed ``logits_chunk_mib`` and the model's logits are its plain output layer's; else None."""
        head = linear_head(model)
        if head is None:
            return None
        rows = logits_chunk_rows(batch.completion_ids.numel(), head.vocab, self.logits_chunk_mib)
        return None if rows is None else (head, rows)


def rollout_engines(agents: Sequence[AgentRuntime]) -> list[Any]:
    """The team's distinct rollout engines (agents that share a model share its engine)."""
    return list({id(a.rollout_engine): a.rollout_engine for a in agents if a.rollout_engine is not None}.values())


def weight_sync_metrics(agents: list[AgentRuntime]) -> dict[str, float]:
    """``perf/weight_sync_s``: the seconds the team's rollout engines spent taking in new weights
    since the last call (each engine once, however many agents share it); empty without engines."""
    engines = rollout_engines(agents)
    if not engines:
        return {}
    return {"perf/weight_sync_s": sum(float(engine.take_sync_seconds()) for engine in engines)}


def unpack_generation(gen: Any, num_prompts: int, num_generations: int) -> tuple[list[SampledPrompt], int]:
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
        rows = [p * num_generations + k for k in range(num_generations)]
        completions = [comp_ids[r][comp_mask[r]].tolist() for r in rows]
        logps = None if token_logps is None else [token_logps[r][comp_mask[r]].clone() for r in rows]
        out.append(SampledPrompt(ids, completions, [str(t) for t in gen.texts[p]], logps))
    return out, int(comp_mask.sum())


def pack_sequences(prompt_ids: list[list[int]], completion_ids: list[list[int]], *, pad_id: int,
                   device: torch.device) -> SequenceBatch:
    """Build the padded batch: ``[pad.. prompt | completion ..pad]`` with explicit position ids, plus
    the distinct prompts once each when several rows share one (see :func:`completion_logits`)."""
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
        prefix=_shared_prompts(prompt_ids, input_ids, attention, position_ids, lp, device),
    )


def _shared_prompts(prompt_ids: list[list[int]], input_ids: torch.Tensor, attention: torch.Tensor,
                    position_ids: torch.Tensor, lp: int, device: torch.device) -> SharedPrompts | None:
    group_of: dict[tuple[int, ...], int] = {}
    first_rows: list[int] = []  # the first row of each distinct prompt
    row_prompt = []
    for row, p in enumerate(prompt_ids):
        if tuple(p) not in group_of:
            group_of[tuple(p)] = len(first_rows)
            first_rows.append(row)
        row_prompt.append(group_of[tuple(p)])
    if len(first_rows) == len(prompt_ids):
        return None  # nothing shared: one packed forward is cheaper
    rows = torch.tensor(first_rows)
    k = len(prompt_ids) // len(first_rows)
    contiguous = row_prompt == [g for g in range(len(first_rows)) for _ in range(k)]
    return SharedPrompts(
        prompt_ids=input_ids[rows, :lp].to(device),
        prompt_mask=attention[rows, :lp].to(device),
        position_ids=position_ids[rows, :lp].to(device),
        row_prompt=torch.tensor(row_prompt, dtype=torch.long, device=device),
        repeats=k if contiguous else None,
    )


def completion_logits(model: Any, batch: SequenceBatch, num_completion: int) -> torch.Tensor:
    """Logits predicting each completion token (B, T, V): the positions from the last prompt token
    to the second-to-last completion column.

    When rows share prompts (the K samples of a node), each distinct prompt is encoded once and its
    keys/values are gathered for the rows that continue it (gradients flow back through the gather),
    so the prompt tokens cost one row instead of K; the result equals the packed forward up to
    floating-point rounding. Otherwise one packed forward, asking only for the needed positions.
    """
    if batch.prefix is not None and not (model.training and _checkpointed(model)):
        logits = _shared_prompt_logits(model, batch, batch.prefix, num_completion)
        if logits is not None:
            return logits
    kwargs = dict(input_ids=batch.input_ids, attention_mask=batch.attention_mask,
                  position_ids=batch.position_ids, use_cache=False)
    try:
        logits = model(**kwargs, logits_to_keep=num_completion + 1).logits
    except TypeError:
        logits = model(**kwargs).logits
    return logits[:, -(num_completion + 1):-1, :]


def completion_hidden(model: Any, batch: SequenceBatch, num_completion: int) -> torch.Tensor:
    """The final hidden states (B, T, H) at the positions :func:`completion_logits` reads, from the
    model's decoder (``model.base_model``) without its output layer, shared prompts encoded once
    as there. For models :func:`engine.trainer.losses.linear_head` knows."""
    base = model.base_model
    if batch.prefix is not None and not (model.training and _checkpointed(model)):
        hidden = _shared_prompt_logits(base, batch, batch.prefix, num_completion, hidden=True)
        if hidden is not None:
            return hidden
    out = base(input_ids=batch.input_ids, attention_mask=batch.attention_mask, position_ids=batch.position_ids,
               use_cache=False)
    return out.last_hidden_state[:, -(num_completion + 1):-1, :]


def _checkpointed(model: Any) -> bool:
    """Activation (gradient) checkpointing is on: such training forwards run without a cache."""
    for name in ("is_activation_checkpointing", "is_gradient_checkpointing"):  # newer, older transformers
        if hasattr(type(model), name):
            return bool(getattr(model, name))
    return False


def _shared_prompt_logits(model: Any, batch: SequenceBatch, prefix: SharedPrompts, t: int, *,
                          hidden: bool = False) -> torch.Tensor | None:
    """None when the model's forward does not take and return a ``transformers`` layered cache
    (checkpointed training runs without one); the caller then uses the packed forward. With
    ``hidden``, ``model`` is a decoder without its output layer and its final hidden states are read."""
    signature = sampler.forward_cache_argument(model)
    if signature is None:
        return None
    cache_key, keeps_logits = signature
    head = model(input_ids=prefix.prompt_ids, attention_mask=prefix.prompt_mask, position_ids=prefix.position_ids,
                 use_cache=True, **({"logits_to_keep": 1} if keeps_logits else {}))
    cache = getattr(head, "cache", None) or getattr(head, "past_key_values", None)
    layers = getattr(cache, "layers", None)
    if not layers or not all(hasattr(layer, "keys") and hasattr(layer, "values") for layer in layers):
        return None
    first = prefix.gather(_read(head, hidden)[:, -1:, :])  # predicts completion token 0
    if t == 1:
        return first
    for layer in layers:
        layer.keys = prefix.gather(layer.keys)
        layer.values = prefix.gather(layer.values)
    lp = prefix.prompt_ids.shape[1]
    rest = model(input_ids=batch.completion_ids[:, :-1], attention_mask=batch.attention_mask[:, :-1],
                 position_ids=batch.position_ids[:, lp:-1], use_cache=True, **{cache_key: cache})
    return torch.cat([first, _read(rest, hidden)], dim=1)


def _read(out: Any, hidden: bool) -> torch.Tensor:
    return out.last_hidden_state if hidden else out.logits


# -- Each agent's work, on the agents' threads when the team has them (engine.trainer.threads) ---------------
def map_agents(fn: Callable[[Any], Any], agents: Sequence[Any], pool: ThreadPoolExecutor | None) -> list[Any]:
    """``fn(agent)`` for every agent, in order: on the pool's threads when there is one, each thread
    computing with its share of torch's intra-op threads (:func:`split_cpu_threads`)."""
    cpu_agents = sum(agent.device.type == "cpu" for agent in agents)
    if pool is not None and getattr(pool, "auto", False) and cpu_agents > max(1, torch.get_num_threads()):
        pool = None  # auto: too few threads now to give each CPU agent one of its own
    if pool is None:
        return [fn(agent) for agent in agents]
    with split_cpu_threads(cpu_agents) as share:

        def run(agent: Any) -> Any:
            # the intra-op thread count is per calling thread (OpenMP): set it in the worker itself
            if torch.get_num_threads() != share:
                torch.set_num_threads(share)
            return fn(agent)

        return list(pool.map(run, agents))


# == The sampling copy (rollout_dtype) ==============================================================
#
# A copy of an agent's weights in another dtype to sample from (``rollout_dtype``).
#
# Sampling a small batch reads every weight once per token, so on a CPU with bfloat16 instructions
# (AVX512-BF16, AMX) or on a GPU, a bfloat16 copy samples faster than the float32 weights being
# trained. Before each sampling call the copy takes in what changed since the last call: every
# weight after a step of an optimizer it watches (torch's fused AdamW leaves the version counters
# alone), and any parameter or buffer written in place otherwise (a ``load_state_dict``, a resume:
# their version counters moved). Training, the update's log-probs and checkpoints stay in the
# model's own dtype.
#
# The samples then come from the rounded policy. The log-probs the sampler returns are the copy's,
# so with ``clip_epsilon`` the update's ratio ``exp(log p - old log p)`` is the importance ratio of
# the trained policy against the one that sampled (not exactly 1 on the first pass).

log = logging.getLogger("cooplab.sampling")


class RolloutCopy:
    """The sampling copy of one model object (agents that share the model share the copy)."""

    def __init__(self, source: torch.nn.Module, dtype: torch.dtype) -> None:
        if is_lora(source):
            raise ValueError(
                "rollout_dtype: LoRA agents sample from their adapters on the frozen base; a copy in another "
                "dtype is not supported for them. Leave rollout_dtype empty, or set torch_dtype for the whole model"
            )
        self.source = source
        self.dtype = dtype
        self.model = copy.deepcopy(source)
        for param in self.model.parameters():  # buffers (rotary frequencies) keep their dtype, as from_pretrained
            param.data = param.data.to(dtype)
        self.model.eval()
        self.model.requires_grad_(False)
        self._pairs = list(zip(_tensors(source), _tensors(self.model), strict=True))
        self._versions = [src._version for src, _ in self._pairs]
        self._stepped = False
        self.tensors_copied = 0  # how many tensors refreshes have copied in (tests, diagnostics)

    def watch(self, optimizer: torch.optim.Optimizer) -> None:
        """Refresh every weight before the next sampling call whenever ``optimizer`` steps."""
        optimizer.register_step_post_hook(self._after_step)

    def _after_step(self, *_: Any) -> None:
        self._stepped = True

    def refreshed(self) -> torch.nn.Module:
        """The copy, after copying in every source tensor that changed since the last refresh."""
        with torch.no_grad():
            for i, (src, dst) in enumerate(self._pairs):
                if self._stepped or src._version != self._versions[i]:
                    dst.copy_(src)
                    self._versions[i] = src._version
                    self.tensors_copied += 1
        self._stepped = False
        return self.model


def _tensors(model: torch.nn.Module) -> list[torch.Tensor]:
    """Parameters then buffers, each once (tied weights appear once), in a fixed order."""
    seen: set[int] = set()
    out: list[torch.Tensor] = []
    for tensor in [*model.parameters(), *model.buffers()]:
        if id(tensor) not in seen:
            seen.add(id(tensor))
            out.append(tensor)
    return out


def native_bfloat16(device: torch.device) -> bool:
    """Whether ``device`` computes bfloat16 natively: a GPU that supports it, or a CPU whose flags list
    AVX512-BF16 or AMX-BF16 (read from ``/proc/cpuinfo``; elsewhere False, so sampling stays float32)."""
    if device.type == "cuda":
        return bool(torch.cuda.is_available() and torch.cuda.is_bf16_supported())
    if device.type != "cpu":
        return False
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def configured_rollout_dtype(config: TrainerConfig) -> str | None:
    """The ``rollout_dtype`` a trainer config asks for, ``auto`` dropped when an inference engine
    samples (``rollout_backend`` other than ``hf``: it samples in the model's own dtype)."""
    setting = config.rollout_dtype
    if setting == "auto" and config.rollout_backend != "hf":
        return None
    return setting


def choose_rollout_dtype(model: torch.nn.Module, rollout_dtype: str | None) -> tuple[str | None, str]:
    """The dtype ``model`` samples in (None: its own weights) and why, for ``rollout_dtype``."""
    weights = next(model.parameters())
    own = str(weights.dtype).removeprefix("torch.")
    if rollout_dtype is None:
        return None, f"rollout_dtype is empty: sampling from the {own} weights"
    if rollout_dtype != "auto":
        return rollout_dtype, f"rollout_dtype is {rollout_dtype}"
    if is_lora(model):
        return None, f"LoRA adapters sample on their frozen base: sampling from the {own} weights"
    if weights.dtype != torch.float32:
        return None, f"the weights are {own} already"
    device = weights.device
    if not native_bfloat16(device):
        return None, f"{device.type} has no native bfloat16: sampling from the float32 weights"
    where = "this GPU computes bfloat16" if device.type == "cuda" else "this CPU has bfloat16 instructions"
    return "bfloat16", f"rollout_dtype auto: {where}"


def rollout_copy_for(model: torch.nn.Module, rollout_dtype: str | None, copies: dict[int, Any]) -> RolloutCopy | None:
    """The sampling copy of ``model`` for ``rollout_dtype`` (one per model object, kept in ``copies``);
    None when unset, when ``auto`` chooses none (:func:`choose_rollout_dtype`) or when the model
    already has that dtype."""
    from engine.models.loading import resolve_dtype  # transformers, only when a copy is asked for

    chosen, _ = choose_rollout_dtype(model, rollout_dtype)
    if chosen is None:
        return None
    dtype = resolve_dtype(chosen)
    assert isinstance(dtype, torch.dtype)  # a dtype's name: choose_rollout_dtype never keeps "auto"
    if next(model.parameters()).dtype == dtype:
        return None
    if id(model) not in copies:
        copies[id(model)] = RolloutCopy(model, dtype)
    return copies[id(model)]


def corrects_sampler(agent: AgentRuntime, rollout_correction: str) -> bool:
    """Whether ``agent``'s update weights its tokens by truncated importance sampling: ``tis`` always
    (where the sampler kept its log-probs), ``auto`` when the agent samples from a copy in another
    dtype than the weights it trains (``rollout_dtype``), ``none`` never."""
    if rollout_correction == "tis":
        return True
    if rollout_correction != "auto" or agent.rollout_copy is None:
        return False
    trained = next((p.dtype for p in agent.model.parameters() if p.is_floating_point()), None)
    return agent.rollout_copy.dtype != trained


# -- the start-up lines that say how each agent samples: which dtype, why, and whether the update
#    is corrected for it (rollout_dtype, rollout_correction) ------------------------------------------
def sampling_notes(agents: Sequence[Any], config: TrainerConfig) -> list[str]:
    """One line per agent: the dtype it samples in and why, and the rollout correction it gets (none
    where the algorithm has no rollout_correction: actor-critic and MADPO)."""
    setting = configured_rollout_dtype(config)
    correction = config.rollout_correction if isinstance(config, POLICY_GRADIENT_CONFIGS) else "none"
    lines = []
    for agent in agents:
        own = str(next(agent.model.parameters()).dtype).removeprefix("torch.")
        _, why = choose_rollout_dtype(agent.model, setting)
        if agent.rollout_copy is None:
            what = f"samples from its {own} weights"
        else:
            what = f"samples from a {str(agent.rollout_copy.dtype).removeprefix('torch.')} copy of its {own} weights"
        fixed = (f"; the update weights each token by truncated importance sampling (tis_cap "
                 f"{config.tis_cap:g})"
                 if isinstance(config, POLICY_GRADIENT_CONFIGS) and corrects_sampler(agent, correction) else "")
        lines.append(f"sampling: agent {agent.name!r} {what} ({why}){fixed}")
    return lines


def announce(lines: Sequence[str]) -> None:
    """Log ``lines`` (a job's run log has a handler); with no logging set up, print them to stderr."""
    for line in lines:
        if logging.getLogger().handlers or log.handlers:
            log.info(line)
        else:
            print(line, file=sys.stderr, flush=True)
