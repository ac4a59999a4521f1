"""Memory per rank of an agent trained with full fine-tuning and AdamW, sharded over ``W`` ranks with
FSDP2 (``parallel_training: fsdp``). Pure arithmetic (torch-free): pre-flight refuses a team that
cannot fit its devices from these numbers, and docs/gpu.md's table is written by :func:`memory_table`.

The accounting, for a model of ``P`` parameters (``P = root + layers x per_layer``, the root being
the embeddings, the final norm and an untied output head), ``W`` ranks, ``p`` bytes per compute
parameter (2 for bfloat16 under mixed precision, 4 without) and ``r`` bytes per reduced gradient
(4: fp32 reduction):

- **states** (sharded, every step): the float32 parameters (4), their float32 gradients (4) and AdamW's
  two moments (8): ``16 P / W`` bytes, on the GPU or, with CPU offload, on the host;
- **gathered** (transient, on the GPU): FSDP2 all-gathers one unit at a time in the compute dtype and
  prefetches the next; the root stays gathered through forward and backward. The peak is the root's
  gathered parameters and gradients ``root x (p + r)`` plus two gathered layers ``2 x per_layer x p``
  and one layer's unsharded gradients ``per_layer x r`` before their reduce-scatter;
- **activations** (per rank: ``batch`` sequences of ``seq`` tokens, hidden ``h``, ``a`` heads, ``L``
  layers, vocabulary ``V``): a layer keeps ``seq x batch x h x (34 + 5 a seq / h)`` bytes in 16-bit
  (the standard transformer estimate, scaled by ``p / 2``); with activation checkpointing each layer
  keeps only its input ``seq x batch x h x p`` and one layer's full activations are recomputed at a
  time; the logits add ``seq x batch x V x (p + 4)`` (the compute-dtype logits and their float32
  log-softmax).

- **reference** (sharded, with ``reference_kl_enabled``): each agent's frozen reference copy is sharded
  like the agent (:mod:`engine.distributed.trainer`), so one rank holds ``b P / W`` bytes of its weights,
  ``b`` the bytes of a loaded weight (4 in float32, 2 in bfloat16), on the host with CPU offload. Its
  forward gathers units as the policy's does, but with no gradients and never at the same time as the
  policy's backward, so it adds nothing to the gathered peak.

Peak per rank = states and reference (0 on the GPU with offload) + gathered + activations. The estimate
leaves out the CUDA context, allocator fragmentation and the KV cache of sampling.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.schema.collaboration import is_centralized
from engine.schema.sources import cached_config_path, hub_cache_folder

if TYPE_CHECKING:
    from engine.schema.run_config import RunConfig

STATE_BYTES_PER_PARAMETER = 16
"""float32 parameter (4) + float32 gradient (4) + AdamW's two float32 moments (8)."""
REDUCE_BYTES = 4
"""Gradients are reduced (reduce-scatter) in float32."""
GIB = 1024 ** 3


@dataclass(frozen=True)
class ModelShape:
    """The shape of a decoder-only transformer (Llama/Qwen2 layout: attention with grouped KV heads,
    a gated MLP, two RMSNorms per layer). ``qkv_bias``: Qwen2's biases on q, k and v."""

    vocab: int
    hidden: int
    intermediate: int
    layers: int
    heads: int
    kv_heads: int
    tied: bool = True
    qkv_bias: bool = True

    def layer_parameters(self) -> int:
        """One decoder layer: q, k, v, o projections, the gated MLP's three matrices, two norms."""
        kv = self.kv_heads * (self.hidden // self.heads)
        bias = (self.hidden + 2 * kv) if self.qkv_bias else 0
        attention = 2 * self.hidden * self.hidden + 2 * self.hidden * kv + bias
        return attention + 3 * self.hidden * self.intermediate + 2 * self.hidden

    def root_parameters(self) -> int:
        """What is not in a layer: the embeddings, the final norm and the output head when untied."""
        return self.vocab * self.hidden * (1 if self.tied else 2) + self.hidden

    def parameters(self) -> int:
        return self.root_parameters() + self.layers * self.layer_parameters()


_QWEN: dict[str, Any] = {"vocab": 151_936, "tied": True, "qkv_bias": True}
SHAPES: dict[str, ModelShape] = {
    # The Qwen2.5 shapes of bench/shapes.py (checked equal in the tests) and Qwen2.5-7B (untied head).
    "qwen2.5-0.5b": ModelShape(hidden=896, intermediate=4864, layers=24, heads=14, kv_heads=2, **_QWEN),
    "qwen2.5-1.5b": ModelShape(hidden=1536, intermediate=8960, layers=28, heads=12, kv_heads=2, **_QWEN),
    "qwen2.5-3b": ModelShape(hidden=2048, intermediate=11008, layers=36, heads=16, kv_heads=2, **_QWEN),
    "qwen2.5-7b": ModelShape(vocab=152_064, hidden=3584, intermediate=18944, layers=28, heads=28, kv_heads=4,
                             tied=False, qkv_bias=True),
}


@dataclass(frozen=True)
class Activations:
    """The batch one rank runs forward and backward at once."""

    batch: int
    seq: int
    checkpointing: bool = True


@dataclass(frozen=True)
class RankMemory:
    """Bytes per rank: the sharded states and reference weights (on the GPU or the host), the gathered
    transient and the activations. ``gpu`` is the peak on the GPU, ``host`` what offload keeps in host
    memory."""

    states: int
    gathered: int
    activations: int
    offload: bool
    reference: int = 0

    @property
    def gpu(self) -> int:
        return (0 if self.offload else self.states + self.reference) + self.gathered + self.activations

    @property
    def host(self) -> int:
        return self.states + self.reference if self.offload else 0


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def state_bytes(parameters: int, world: int) -> int:
    """Sharded float32 parameters, gradients and AdamW moments on one of ``world`` ranks."""
    if parameters < 0 or world < 1:
        raise ValueError(f"parameters must be >= 0 and world >= 1 (got {parameters}, {world})")
    return STATE_BYTES_PER_PARAMETER * _ceil_div(parameters, world)


def gathered_bytes(shape: ModelShape, *, mixed_precision: bool = True) -> int:
    """The transient peak of FSDP2's all-gathers (see the module's docstring); independent of the world
    size (at one rank the compute-dtype copies are still made under mixed precision)."""
    p = 2 if mixed_precision else 4
    layer = shape.layer_parameters()
    return shape.root_parameters() * (p + REDUCE_BYTES) + 2 * layer * p + layer * REDUCE_BYTES


def activation_bytes(shape: ModelShape, activations: Activations, *, mixed_precision: bool = True) -> int:
    """Activations of one rank's forward and backward (see the module's docstring)."""
    p = 2 if mixed_precision else 4
    b, s, h = activations.batch, activations.seq, shape.hidden
    full_layer = s * b * h * 34 * p // 2 + 5 * shape.heads * s * s * b * p // 2
    logits = s * b * shape.vocab * (p + 4)
    kept = shape.layers * s * b * h * p + full_layer if activations.checkpointing else shape.layers * full_layer
    return kept + logits


def reference_bytes(parameters: int, world: int, weight_bytes: int) -> int:
    """A frozen reference of ``parameters`` weights of ``weight_bytes`` each, sharded over ``world`` ranks:
    one rank's (the larger) shard."""
    if parameters < 0 or world < 1 or weight_bytes < 0:
        raise ValueError(f"parameters, weight bytes must be >= 0 and world >= 1 (got {parameters}, {weight_bytes}, "
                         f"{world})")
    return weight_bytes * _ceil_div(parameters, world)


def rank_memory(shape: ModelShape, world: int, *, offload: bool = False, mixed_precision: bool = True,
                activations: Activations | None = None, reference_weight_bytes: int = 0) -> RankMemory:
    """Bytes per rank of ``shape`` trained on ``world`` ranks (activations 0 when ``activations`` is None),
    with a reference copy of weights of ``reference_weight_bytes`` each sharded alike (0: no reference)."""
    return RankMemory(states=state_bytes(shape.parameters(), world),
                      reference=reference_bytes(shape.parameters(), world, reference_weight_bytes),
                      gathered=gathered_bytes(shape, mixed_precision=mixed_precision),
                      activations=0 if activations is None else activation_bytes(shape, activations,
                                                                                 mixed_precision=mixed_precision),
                      offload=offload)


def gib(n: int) -> str:
    return f"{n / GIB:.1f}"


def memory_table(shapes: Mapping[str, ModelShape] = SHAPES, worlds: Iterable[int] = (1, 2, 4, 8), *,
                 activations: Activations = Activations(batch=8, seq=1024)) -> str:
    """A markdown table: per shape and world size, the GiB per rank without offload (states + gathered +
    activations), with CPU offload (GPU, and host), and what a float32 reference (``reference_kl_enabled``)
    adds per rank at each world size."""
    worlds = list(worlds)
    head = ("| model | parameters | " + " | ".join(f"W={w}" for w in worlds) + " | W=1 offload: GPU / host | "
            f"reference KL adds, W={' / '.join(str(w) for w in worlds)} |")
    rule = "|---|---:|" + "---:|" * len(worlds) + "---:|---:|"
    rows = [head, rule]
    for name, shape in shapes.items():
        cells = [gib(rank_memory(shape, w, activations=activations).gpu) for w in worlds]
        off = rank_memory(shape, 1, offload=True, activations=activations)
        adds = " / ".join(gib(reference_bytes(shape.parameters(), w, 4)) for w in worlds)
        rows.append(f"| {name} | {shape.parameters() / 1e9:.2f} B | " + " | ".join(cells)
                    + f" | {gib(off.gpu)} / {gib(off.host)} | {adds} |")
    return "\n".join(rows)


def shape_from_config(config: Mapping[str, Any]) -> ModelShape | None:
    """The shape a Hugging Face ``config.json`` of a Llama/Qwen2/Mistral-like model declares, None when a
    size it needs is missing (another architecture: no accounting)."""
    text = config.get("text_config")
    section: Mapping[str, Any] = text if isinstance(text, Mapping) else config
    keys = ("vocab_size", "hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads")
    values: list[Any] = [section.get(k) for k in keys]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in values):
        return None
    vocab, hidden, intermediate, layers, heads = (int(v) for v in values)
    kv = int(section.get("num_key_value_heads") or heads)
    model_type = str(section.get("model_type", ""))
    return ModelShape(vocab=vocab, hidden=hidden, intermediate=intermediate, layers=layers, heads=heads,
                      kv_heads=kv, tied=bool(section.get("tie_word_embeddings", True)),
                      qkv_bias=bool(section.get("attention_bias", model_type.startswith("qwen2"))))


def fit_problem(agent: str, shape: ModelShape, world: int, device_bytes: int, *, offload: bool = False,
                mixed_precision: bool = True, queue_gpus: int | None = None,
                reference_weight_bytes: int = 0) -> str | None:
    """Why an agent of ``shape`` on ``world`` ranks of ``device_bytes`` each cannot train, or None when its
    states and gathered units fit (activations come on top: this is a lower bound, so it never refuses a
    run that would fit). The message names the agent, the bytes needed and the options; ``queue_gpus``
    (the GPUs of the run's queue, when known): more ranks than that need a queue with more GPUs;
    ``reference_weight_bytes``: the agent's reference copy, sharded alike (``reference_kl_enabled``)."""
    def need_at(w: int, offloaded: bool) -> RankMemory:
        return rank_memory(shape, w, offload=offloaded, mixed_precision=mixed_precision,
                           reference_weight_bytes=reference_weight_bytes)

    need = need_at(world, offload)
    if need.gpu <= device_bytes:
        return None
    options = []
    more_ranks = _fewest_ranks(world, lambda w: need_at(w, offload).gpu <= device_bytes, queue_gpus)
    if more_ranks is not None:
        fits, more = more_ranks
        options.append(f"shard it over {fits} ranks (parallel_training: fsdp, fsdp_ranks: {fits}{more})")
    options.append("train a LoRA adapter (lora_rank) instead of every weight")
    if not offload:
        host = need_at(world, True).host
        options.append(f"offload its states to the host (fsdp_cpu_offload: true; GPU {gib(need.gathered)} GiB, "
                       f"host {gib(host)} GiB per rank)")
    reference = f" + reference {gib(need.reference if not offload else 0)} GiB" if need.reference else ""
    return (f"agent {agent} ({shape.parameters():,} parameters) needs at least {need.gpu:,} bytes "
            f"({gib(need.gpu)} GiB) per rank on {world} rank{'s' if world > 1 else ''} for full fine-tuning "
            f"with AdamW (states {gib(need.states if not offload else 0)} GiB{reference} + gathered "
            f"{gib(need.gathered)} GiB, before activations), over the {device_bytes:,} bytes ({gib(device_bytes)} "
            f"GiB) of a device; " + "; or ".join(options))


def source_shape(source: str, hub_cache_dirs: Iterable[str | os.PathLike[str]] | None = None) -> ModelShape | None:
    """The shape of a model source found on this machine (a folder's or the hub cache's ``config.json``),
    None when it is not found here or declares no accounting shape (built-in tiny models: too small to
    matter)."""
    folder = Path(source).expanduser()
    path: Path | None = folder / "config.json" if folder.is_dir() else None
    if path is None and hub_cache_dirs is not None and "/" in source and not source.startswith(("/", ".", "~")):
        cached = hub_cache_folder(source, list(hub_cache_dirs))
        path = cached_config_path(cached) if cached is not None else None
    if path is None or not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None  # the source check names an unreadable config
    return shape_from_config(data) if isinstance(data, dict) else None


_DTYPE_BYTES = {"float32": 4, "auto": 4, "bfloat16": 2, "float16": 2}


def memory_problems(config: RunConfig, device_bytes: int, hub_cache_dirs: Iterable[str | os.PathLike[str]] | None = None,
                    shapes: Mapping[str, ModelShape] | None = None, *,
                    ranks: int | None = None) -> list[tuple[str, str]]:
    """``(field, message)`` for every agent of a run config whose training cannot fit one device of
    ``device_bytes`` (a lower bound: states and gathered units, before activations). With
    ``parallel_training: fsdp`` the FSDP2 accounting over ``fsdp_ranks`` ranks (empty: ``ranks``, the GPUs
    of the queue's job, one rank each; 1 when unknown) and ``fsdp_cpu_offload``, and then the team's
    (:func:`team_problem`: every rank holds a shard of every agent); otherwise the agent is whole on one
    device with its parameters, gradients and AdamW moments in ``torch_dtype`` (4 x its bytes per parameter). With ``reference_kl_enabled`` each
    agent's frozen reference copy (its weights in ``torch_dtype``) is counted too: sharded like the agent
    under fsdp, whole on the agent's device otherwise unless ``reference_devices`` puts it elsewhere.
    ``shapes`` (by agent name) replaces looking the sources up. LoRA agents (whose reference is their
    own frozen base) and a centralized run's joint model are not accounted."""
    t = config.trainer
    fsdp = t.parallel_training == "fsdp"
    world = (t.fsdp_ranks or ranks or 1) if fsdp else 1
    offload = t.fsdp_cpu_offload if fsdp else False
    dtype_bytes = _DTYPE_BYTES.get(t.torch_dtype, 4)
    reference = dtype_bytes if t.reference_kl_enabled and not t.reference_devices else 0
    if is_centralized(t.algorithm, t.collaboration_mode):
        return []
    problems = []
    accounted: dict[str, ModelShape] = {}
    for i, agent in enumerate(config.agents):
        if agent.lora_rank is not None:
            continue
        shape = (shapes or {}).get(agent.name) if shapes is not None else source_shape(agent.model, hub_cache_dirs)
        if shape is None:
            continue
        accounted[agent.name] = shape
        if fsdp:
            problem = fit_problem(agent.name, shape, world, device_bytes, offload=offload,
                                  mixed_precision=dtype_bytes == 2, queue_gpus=ranks, reference_weight_bytes=reference)
        else:
            need = (4 * dtype_bytes + reference) * shape.parameters()
            problem = None if need <= device_bytes else (
                f"agent {agent.name} ({shape.parameters():,} parameters) needs at least {need:,} bytes "
                f"({gib(need)} GiB) on one device for full fine-tuning with AdamW in {t.torch_dtype} (parameters, "
                f"gradients and two moments{', and its reference copy' if reference else ''}, before activations), "
                f"over the {device_bytes:,} bytes "
                f"({gib(device_bytes)} GiB) of a device; shard it over several ranks (parallel_training: fsdp), "
                f"or train a LoRA adapter (lora_rank) instead of every weight")
        if problem is not None:
            problems.append((f"agents.{i}.model", problem))
    if fsdp and not problems and len(accounted) > 1:
        team = team_problem(accounted, world, device_bytes, offload=offload, mixed_precision=dtype_bytes == 2,
                            queue_gpus=ranks, reference_weight_bytes=reference)
        if team is not None:
            problems.append(("agents", team))
    return problems


def team_bytes(shapes: Mapping[str, ModelShape], world: int, *, offload: bool = False, mixed_precision: bool = True,
               reference_weight_bytes: int = 0) -> int:
    """GPU bytes per rank of a team under fsdp, before activations: every rank holds a shard of every agent
    (its states and reference, on the host with offload), and the agents take their updates one at a
    time, so the gathered transient is the largest agent's."""
    needs = [rank_memory(shape, world, offload=offload, mixed_precision=mixed_precision,
                         reference_weight_bytes=reference_weight_bytes) for shape in shapes.values()]
    return sum(n.gpu - n.gathered for n in needs) + max((n.gathered for n in needs), default=0)


def team_problem(shapes: Mapping[str, ModelShape], world: int, device_bytes: int, *, offload: bool = False,
                 mixed_precision: bool = True, queue_gpus: int | None = None,
                 reference_weight_bytes: int = 0) -> str | None:
    """Why a team whose agents each fit a rank alone cannot fit it together (:func:`team_bytes`), or None;
    the message names each agent's share and the options."""
    def team_at(w: int) -> int:
        return team_bytes(shapes, w, offload=offload, mixed_precision=mixed_precision,
                          reference_weight_bytes=reference_weight_bytes)

    need = team_at(world)
    if need <= device_bytes:
        return None
    held = {name: rank_memory(shape, world, offload=offload, mixed_precision=mixed_precision,
                              reference_weight_bytes=reference_weight_bytes) for name, shape in shapes.items()}
    shares = " + ".join(f"{name} {gib(n.gpu - n.gathered)}" for name, n in held.items())
    fixes = []
    more_ranks = _fewest_ranks(world, lambda w: team_at(w) <= device_bytes, queue_gpus)
    if more_ranks is not None:
        fits, more = more_ranks
        fixes.append(f"shard the team over {fits} ranks (fsdp_ranks: {fits}{more})")
    fixes.append("train LoRA adapters (lora_rank) instead of every weight")
    if not offload:
        fixes.append("offload the states to the host (fsdp_cpu_offload: true)")
    return (f"the team needs at least {need:,} bytes ({gib(need)} GiB) per rank on {world} rank"
            f"{'s' if world > 1 else ''}: every rank holds a shard of every agent (states"
            f"{' and references' if reference_weight_bytes else ''}, GiB: {shares}) plus the largest agent's "
            f"gathered units, before activations, over the {device_bytes:,} bytes ({gib(device_bytes)} GiB) of a "
            f"device; " + "; or ".join(fixes))


def _fewest_ranks(world: int, fits_at: Callable[[int], bool], queue_gpus: int | None) -> tuple[int, str] | None:
    """The fewest ranks above ``world`` (a power of two up to 64) at which ``fits_at`` holds, with what a
    suggestion of them adds when the queue has fewer GPUs: the worker that owns that many; None if none fits."""
    fits = next((w for w in (2, 4, 8, 16, 32, 64) if w > world and fits_at(w)), None)
    if fits is None:
        return None
    more = (f" on a worker that owns {fits} GPUs (cooplab worker --device cuda:{','.join(map(str, range(fits)))})"
            if queue_gpus is not None and fits > queue_gpus else "")
    return fits, more
