"""The fast token step: one decode step of a Llama-family model without its module stack
(:class:`FastDecoder`), and the once-per-model check that keeps it where its exactness is not
established (devices other than the CPU).

Sections, top to bottom:

- **The fast step** (:class:`FastDecoder`): the model's weights read once, the same tensor operations
  as ``transformers``' SDPA path, a KV cache allocated once per completion.
- **The check** (:func:`check_fast_step`, :func:`fast_step_verdicts`): on devices other than the CPU, the
  fast step (and the static-shape step of :mod:`engine.sampling.decoder`) compared once per model,
  device and dtype with the model's forward.
"""

from __future__ import annotations

import logging
import weakref
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

# == The fast step =================================================================================
#
# A one-token decode step for Llama-family models (Llama, Qwen2, Qwen3, Mistral, SmolLM2) without the
# module stack.
#
# On small models a decode step is dominated by Python: every token walks ~30 ``nn.Module`` calls per
# layer, rebuilds the causal mask and position embeddings, and grows a ``DynamicCache`` by
# concatenation. ``FastDecoder`` reads the model's own weights and runs the same tensor operations
# in the same order as ``transformers``' SDPA code path (RMSNorm in float32, rotary embedding from
# the model's ``inv_freq``, Qwen3's RMSNorm of each query and key head before it, grouped-query
# attention through ``scaled_dot_product_attention``, the gated MLP), writing keys and values into a
# cache allocated once for the whole completion. The prompt itself is encoded by the model's regular
# forward (one call), so only the per-token loop is replaced. The logits are bit-identical to the
# model's forward: tests compare them with ``torch.equal`` (and the sampled tokens with
# ``generate``), so a ``transformers`` upgrade that changes the reference computation fails loudly
# instead of drifting.
#
# ``FastDecoder.supports(model, positions)`` is False for anything this path does not reproduce (other
# architectures, attention other than SDPA, scaled RoPE variants, sliding windows, tensor-parallel
# splits, quantised projections or adapters other than one plain LoRA adapter, hooks, training mode);
# callers then use the model's forward. On devices other than the CPU (a GPU, where SDPA may pick
# other kernels for a strided cache) the step is not known to be exact: the lean decoder checks it
# against the forward once per model, device and dtype and keeps it within a stated tolerance
# (:mod:`engine.sampling.fast_step`); a model whose check failed is not supported there. A Mistral model's window (``sliding_window``, 4096 by default) applies to every
# layer: the step is exact while the keys and values attended (prompt, padding included, plus the
# tokens stepped) stay shorter than the window, where its window mask equals the full causal one and
# ``transformers`` skips it as it does for full attention; from a key/value length equal to the
# window it builds an explicit mask, which SDPA rounds differently (seen: one ulp), so longer
# completions use the model's forward.

_SUPPORTED = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM", "MistralForCausalLM"}
_LAYERS = {"LlamaDecoderLayer", "Qwen2DecoderLayer", "Qwen3DecoderLayer", "MistralDecoderLayer"}
_WINDOW_ON_EVERY_LAYER = {"MistralForCausalLM"}  # its attention takes ``config.sliding_window`` as is


@dataclass
class _Layer:
    """One decoder layer's weights: norms as (weight, eps), projections as :class:`_Proj`."""

    norm1: tuple[torch.Tensor, float]
    norm2: tuple[torch.Tensor, float]
    q: _Proj
    k: _Proj
    v: _Proj
    o: _Proj
    gate: _Proj
    up: _Proj
    down: _Proj
    act: Any
    q_norm: tuple[torch.Tensor, float] | None = None  # Qwen3: RMSNorm over each head's dims, before rotary
    k_norm: tuple[torch.Tensor, float] | None = None


@dataclass
class _Proj:
    """A projection as the model computes it: ``F.linear`` with the weight and bias, plus, for a peft
    LoRA layer, its adapter's ``B(A(x)) * scaling`` added the way peft adds it (same ops, same order)."""

    weight: torch.Tensor
    bias: torch.Tensor | None
    lora: tuple[torch.Tensor, torch.Tensor, float] | None = None

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        out = F.linear(x, self.weight, self.bias)
        if self.lora is None:
            return out
        a, b, scaling = self.lora
        xa = x if x.dtype == a.dtype else x.to(a.dtype)
        return (out + F.linear(F.linear(xa, a), b) * scaling).to(out.dtype)


def _plain_linear(module: Any) -> bool:
    return type(module) is torch.nn.Linear and module.weight.is_floating_point() and not module._forward_hooks


def _lora_adapter(module: Any) -> tuple[torch.Tensor, torch.Tensor, float] | None:
    """(A, B, scaling) of a peft LoRA linear with one plain adapter active (no DoRA or other variant,
    not merged, no bias on B, dropout off in eval); None for anything else."""
    base = getattr(module, "base_layer", None)
    if base is None or not hasattr(module, "lora_A") or module._forward_hooks or not _plain_linear(base):
        return None
    active = list(getattr(module, "active_adapters", []))
    if len(active) != 1 or module.merged or module.disable_adapters or active[0] not in module.lora_A:
        return None
    name = active[0]
    a, b = module.lora_A[name], module.lora_B[name]
    if name in getattr(module, "lora_variant", {}) or not (_plain_linear(a) and _plain_linear(b)) or b.bias is not None:
        return None
    if not isinstance(module.lora_dropout[name], torch.nn.Identity | torch.nn.Dropout):
        return None
    return a.weight, b.weight, float(module.scaling[name])


def _attention_supported(model: Any, positions: int | None) -> bool:
    """SDPA, default RoPE, no tensor-parallel split, full attention on every layer, and for Mistral no
    window or one longer than ``positions`` (see the module doc)."""
    cfg = model.config
    rope = getattr(cfg, "rope_parameters", None) or {}
    if getattr(cfg, "_attn_implementation", None) != "sdpa" or rope.get("rope_type", "default") != "default":
        return False
    if getattr(cfg, "pretraining_tp", 1) != 1 or getattr(cfg, "use_sliding_window", False):
        return False
    if any(t != "full_attention" for t in (getattr(cfg, "layer_types", None) or [])):
        return False
    window = getattr(cfg, "sliding_window", None) if type(model).__name__ in _WINDOW_ON_EVERY_LAYER else None
    return window is None or (positions is not None and positions < window)


def _plain_head_norms(attention: Any) -> bool:
    """No per-head norms (Llama, Qwen2, Mistral), or Qwen3's plain RMSNorms over the head dims."""
    norms: list[Any] = [getattr(attention, name, None) for name in ("q_norm", "k_norm")]
    if all(norm is None for norm in norms):
        return True
    return all(type(norm).__name__ == "Qwen3RMSNorm" and not norm._forward_hooks and not norm._forward_pre_hooks
               and norm.weight.shape == (attention.head_dim,) for norm in norms)


def _norm(module: Any) -> tuple[torch.Tensor, float] | None:
    return None if module is None else (module.weight, module.variance_epsilon)


def _linear(module: Any) -> _Proj:
    lora = _lora_adapter(module)
    base = module.base_layer if lora is not None else module
    return _Proj(base.weight, base.bias, lora)


def _rms(x: torch.Tensor, norm: tuple[torch.Tensor, float]) -> torch.Tensor:
    """RMSNorm as ``transformers`` computes it (statistics in float32, scaled in the input dtype)."""
    weight, eps = norm
    if x.dtype == torch.float32:
        return weight * (x * x.pow(2).mean(-1, keepdim=True).add_(eps).rsqrt_())
    h = x.to(torch.float32)
    h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + eps)
    return weight * h.to(x.dtype)


def _head_norm(x: torch.Tensor, norm: tuple[torch.Tensor, float] | None) -> torch.Tensor:
    """Qwen3's RMSNorm over each head's dims (the model's (B, 1, H, D) view of the projection and this
    (B, H, 1, D) one are the same memory, so each head is reduced alike); identity without one."""
    return x if norm is None else _rms(x, norm)


def _rotary(x: torch.Tensor, cos: torch.Tensor, signed_sin: torch.Tensor) -> torch.Tensor:
    """``x * cos + rotate_half(x) * sin`` in fewer ops: ``rotate_half(x) * sin`` equals
    ``roll(x, half) * [-sin_lo, sin_hi]`` exactly (a sign flip commutes with rounding)."""
    return (x * cos).add_(torch.roll(x, x.shape[-1] // 2, dims=-1).mul_(signed_sin))


class FastDecoder:
    """Runs one-token decode steps of a supported model against a pre-allocated KV cache.

    Build it after the prompt's forward: ``FastDecoder(model, cache, batch, max_len)`` copies the
    prompt's keys/values (from the returned ``DynamicCache``) into buffers of ``max_len`` positions;
    each :meth:`step` appends one token per row and returns (B, V) logits. (The lean decoder
    encodes each prompt once and repeats its cache to the K sample rows before handing it over.)
    """

    @staticmethod
    def supports(model: Any, positions: int | None = None) -> bool:
        """True when :meth:`step` reproduces ``model``'s forward (see the module doc) while the cache
        holds at most ``positions`` keys (the prompt's, padding included, plus one per step; the
        lean decoder steps every sampled token but the last); None claims only models whose attention
        is full at every length."""
        if type(model).__name__ not in _SUPPORTED or model.training:
            return False
        if not fast_step_kept(model) and needs_check(model) is False:  # checked on this device and refused
            return False
        if not _attention_supported(model, positions):
            return False
        inner = model.model
        if inner.rotary_emb.attention_scaling != 1.0 or model._forward_hooks or model._forward_pre_hooks:
            return False
        if not {type(layer).__name__ for layer in inner.layers} <= _LAYERS:
            return False
        if any(layer._forward_hooks or layer._forward_pre_hooks for layer in inner.layers):
            return False
        if not all(_plain_head_norms(layer.self_attn) for layer in inner.layers):
            return False
        linears = [model.lm_head] + [
            proj for layer in inner.layers
            for proj in (layer.self_attn.q_proj, layer.self_attn.k_proj, layer.self_attn.v_proj,
                         layer.self_attn.o_proj, layer.mlp.gate_proj, layer.mlp.up_proj, layer.mlp.down_proj)
        ]  # fmt: skip
        # plain float nn.Linear, or one with a plain LoRA adapter: quantised or other adapter-wrapped
        # projections compute something else
        return all(_plain_linear(m) or _lora_adapter(m) is not None for m in linears)

    def __init__(self, model: Any, prompt_cache: Any, batch: int, max_len: int) -> None:
        self._read_weights(model)
        self.keys: list[torch.Tensor] = []
        self.values: list[torch.Tensor] = []
        for index in range(self.num_layers):
            k, v = _cache_layer(prompt_cache, index)
            shape = (batch, k.shape[1], max_len, k.shape[3])
            kb, vb = k.new_empty(shape), v.new_empty(shape)
            kb[:, :, : k.shape[2]] = k
            vb[:, :, : v.shape[2]] = v
            self.keys.append(kb)
            self.values.append(vb)
        self.length = int(_cache_layer(prompt_cache, 0)[0].shape[2])

    def _read_weights(self, model: Any) -> None:
        """The model's weights as the step reads them (no copies: the parameters themselves)."""
        inner = model.model
        cfg = model.config
        self.embed = inner.embed_tokens.weight
        self.final_norm = (inner.norm.weight, inner.norm.variance_epsilon)
        self.lm_head = _linear(model.lm_head)
        self.inv_freq = inner.rotary_emb.inv_freq.to(torch.float)
        attn0 = inner.layers[0].self_attn
        self.head_dim = attn0.head_dim
        self.scaling = attn0.scaling
        self.groups = attn0.num_key_value_groups
        self.num_layers = cfg.num_hidden_layers
        self.layers = [
            _Layer(
                norm1=(layer.input_layernorm.weight, layer.input_layernorm.variance_epsilon),
                norm2=(layer.post_attention_layernorm.weight, layer.post_attention_layernorm.variance_epsilon),
                q=_linear(layer.self_attn.q_proj), k=_linear(layer.self_attn.k_proj),
                v=_linear(layer.self_attn.v_proj), o=_linear(layer.self_attn.o_proj),
                gate=_linear(layer.mlp.gate_proj), up=_linear(layer.mlp.up_proj),
                down=_linear(layer.mlp.down_proj), act=layer.mlp.act_fn,
                q_norm=_norm(getattr(layer.self_attn, "q_norm", None)),
                k_norm=_norm(getattr(layer.self_attn, "k_norm", None)),
            )
            for layer in inner.layers[: self.num_layers]
        ]  # fmt: skip

    def step(self, ids: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """Logits (B, V) for one new token per row. ``ids`` and ``positions`` are (B, 1); ``mask`` is
        None (no padding anywhere) or the (B, L+1) 0/1 attention mask over the cache and the new token.
        """
        t = self.length
        attn_mask = None if mask is None else mask[:, None, None, : t + 1].bool()

        def store(index: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            self.keys[index][:, :, t : t + 1] = k
            self.values[index][:, :, t : t + 1] = v
            return self.keys[index][:, :, : t + 1], self.values[index][:, :, : t + 1]

        logits = self._run(ids, positions, attn_mask, store)
        self.length = t + 1
        return logits

    def _run(self, ids: torch.Tensor, positions: torch.Tensor, attn_mask: torch.Tensor | None,
             store: Any) -> torch.Tensor:
        """The layer stack for one token per row: ``store(layer, k, v)`` writes the token's keys and
        values into the cache and returns the keys and values to attend to; ``attn_mask`` is None or
        a (B, 1, 1, keys) boolean mask. Returns the (B, V) logits."""
        batch = ids.shape[0]
        h = F.embedding(ids, self.embed)
        freqs = positions[..., None].float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos().to(h.dtype).unsqueeze(1)  # (B, 1, 1, D)
        sin = emb.sin().to(h.dtype)
        half = sin.shape[-1] // 2
        signed_sin = torch.cat((-sin[..., :half], sin[..., half:]), dim=-1).unsqueeze(1)
        shape = (batch, -1, 1, self.head_dim)  # one token: (B, 1, H*D) is (B, H, 1, D) in memory
        for index, layer in enumerate(self.layers):
            x = _rms(h, layer.norm1)
            q = _rotary(_head_norm(layer.q(x).view(shape), layer.q_norm), cos, signed_sin)
            k = _rotary(_head_norm(layer.k(x).view(shape), layer.k_norm), cos, signed_sin)
            v = layer.v(x).view(shape)
            keys, values = store(index, k, v)
            out = _attention(q, keys, values, attn_mask, self.groups, self.scaling)
            h = layer.o(out).add_(h)  # the residual add (a + b == b + a in floating point)
            x = _rms(h, layer.norm2)
            gated = layer.act(layer.gate(x)).mul_(layer.up(x))
            h = layer.down(gated).add_(h)
        h = _rms(h, self.final_norm)
        return self.lm_head(h[:, -1:, :])[:, -1]  # the shapes the model's forward uses


def _cache_layer(cache: Any, index: int) -> tuple[torch.Tensor, torch.Tensor]:
    layer = cache.layers[index]
    return layer.keys, layer.values


def _attention(q: torch.Tensor, keys: torch.Tensor, values: torch.Tensor, mask: torch.Tensor | None,
               groups: int, scaling: float) -> torch.Tensor:
    """SDPA for one query token the way ``transformers`` calls it: grouped-query attention through
    ``enable_gqa`` without a mask, and query heads folded onto their key/value head with one."""
    batch, heads, _, dim = q.shape
    kwargs: dict[str, Any] = {}
    if groups > 1:
        if mask is None and dim <= 256:
            kwargs["enable_gqa"] = True
        else:
            q = q.reshape(batch, heads // groups, groups, dim)
    out = F.scaled_dot_product_attention(q, keys, values, attn_mask=mask, dropout_p=0.0, scale=scaling, **kwargs)
    return out.reshape(batch, 1, heads * dim)  # (B, H, 1, D) -> (B, 1, H*D), heads in order


# == The check =====================================================================================
#
# The fast token step on devices where its exactness is not established: checked once per model.
#
# On the CPU the fast step (:mod:`engine.sampling.fast_step`) is bit-identical to the model's forward, which
# the test suite verifies with ``torch.equal``. On other devices (CUDA) the attention kernels may take
# other algorithms for its strided cache, and bfloat16/float16 round at every product, so no test here
# can promise equality. There the lean decoder checks the fast step once per model, device and dtype:
# the first decode step runs both ways (the fast step and the model's own forward, over the same
# prompt cache) and the fast step is kept when every logit agrees within
#
#     |fast - forward| <= RTOL[dtype] * max(1, max |forward|)
#
# (float32: 1e-4, about a thousand ulps of a logit near 10; bfloat16: 2**-5, four of its eight mantissa
# bits; float16: 2**-7). That step's tokens are drawn from the forward's logits either way, and both
# caches hold the step's keys and values, so the call continues on whichever path the check chose.
# A failed check is logged as a warning naming the difference and the tolerance, and that model
# samples through its forward from then on. :func:`fast_step_verdicts` reports what was decided.

log = logging.getLogger(__name__)

EXACT_DEVICE_TYPES = {"cpu"}  # the fast step is bit-identical here (tests compare with torch.equal)
RTOL = {torch.float32: 1e-4, torch.bfloat16: 2.0**-5, torch.float16: 2.0**-7}

# model -> {(device, dtype[, kind]): (kept, max |difference|, allowed)}; kind "static" is the static-shape
# step of engine.sampling.decoder (its own verdict: it attends over a padded key block)
_verdicts: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], tuple[bool, float, float]]] = (
    weakref.WeakKeyDictionary())


def _key(model: Any, kind: str = "fast") -> tuple[str, ...]:
    weight = model.get_output_embeddings().weight
    key = (str(weight.device), str(weight.dtype).removeprefix("torch."))
    return key if kind == "fast" else (*key, kind)


def needs_check(model: Any, kind: str = "fast") -> bool | None:
    """None: the fast step is exact on this model's device (nothing to check). True: not checked
    yet on this device and dtype. False: checked; :func:`fast_step_kept` says with what result.
    ``kind`` "static" asks about the static-shape step (:mod:`engine.sampling.decoder`)."""
    if model.get_output_embeddings().weight.device.type in EXACT_DEVICE_TYPES:
        return None
    return _key(model, kind) not in _verdicts.get(model, {})


def fast_step_kept(model: Any, kind: str = "fast") -> bool:
    """Whether the fast step may run for ``model`` on its device and dtype (exact there, or checked
    and within tolerance)."""
    if needs_check(model, kind) is None:
        return True
    verdict = _verdicts.get(model, {}).get(_key(model, kind))
    return verdict is not None and verdict[0]


def check_fast_step(model: Any, fast: torch.Tensor, forward: torch.Tensor, kind: str = "fast") -> bool:
    """Compare one step's (B, V) logits of the fast step and of the model's forward, record the
    verdict for ``model``'s device and dtype, and return it."""
    dtype = model.get_output_embeddings().weight.dtype
    reference = forward.float()
    difference = float((fast.float() - reference).abs().max())
    allowed = RTOL.get(dtype, RTOL[torch.float32]) * max(1.0, float(reference.abs().max()))
    kept = difference <= allowed  # a NaN difference fails too
    _verdicts.setdefault(model, {})[_key(model, kind)] = (kept, difference, allowed)
    if not kept:
        device, dtype_name = _key(model)
        log.warning("%s token step off for %s on %s (%s): its logits differ from the model's forward by "
                    "up to %.3g (allowed %.3g); sampling goes through the forward", kind, type(model).__name__,
                    device, dtype_name, difference, allowed)
    return kept


def fast_step_verdicts(model: Any) -> dict[str, dict[str, Any]]:
    """What was decided for ``model``: ``{"cuda:0/bfloat16": {"kept": ..., "max_difference": ...,
    "allowed": ...}}`` (empty when no check ran: on the CPU none is needed)."""
    return {"/".join(key): {"kept": kept, "max_difference": difference, "allowed": allowed}
            for key, (kept, difference, allowed) in _verdicts.get(model, {}).items()}
