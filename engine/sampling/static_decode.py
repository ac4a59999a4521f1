"""Static-shape decoding: the lean decoder's token loop (:mod:`engine.sampling.decoder`) with fixed
tensor shapes, CUDA graphs and no host synchronisation per token (``decode_graphs``; on by default on
CUDA, :func:`engine.sampling.decoder.static_wanted`).
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from torch.nn.attention import SDPBackend, sdpa_kernel

from engine.sampling.decoder import (
    Decoding,
    FastDecoder,
    _cache_layer,
    _forward_kwargs,
    _prefill,
    _prefix_layout,
    decode_lean,
    fast_step_kept,
    filter_logits,
    needs_check,
)
from engine.sampling.fast_step_check import check_fast_step

log = logging.getLogger(__name__)

# On a GPU a one-token decode step of a small model is bound by kernel launches (a few hundred per
# token) and by the host waiting for the device, not by arithmetic. This path removes both:
#
# - **Static KV cache.** :class:`StaticDecoder` holds keys and values for ``rows`` x ``max_len``
#   positions, a boolean attention mask over them and the step's inputs (token ids, positions, the
#   column written) in fixed buffers. A step writes its keys and values at the column held in a
#   device tensor (``index_copy_``) and attends over the first ``L`` columns, ``L`` the written length
#   rounded up to ``key_block`` (the unwritten tail is masked out): every step of a block has the same
#   shapes and buffer addresses.
# - **CUDA graphs.** On CUDA each (row bucket, ``L``) step is captured once in a ``torch.cuda.CUDAGraph``
#   and replayed (one launch per token instead of hundreds). The graphs, the cache and the buffers
#   are kept per model and reused by the next call with the same row bucket (rows rounded up to a power
#   of two; the spare rows compute on a dummy key and are never sampled), while the model's weights
#   are the same tensors (the optimizer updates them in place; a replaced tensor rebuilds).
#   Elsewhere (the CPU, and worker threads: agents sampling concurrently under ``parallel_training:
#   mp``, where another agent's kernels would meet a capture in progress) the same step runs eagerly.
# - **Sampling on the device.** Temperature/top-k/top-p filtering, the draw, the log-prob and the EOS
#   bookkeeping are tensor operations; the loop asks the host whether every row has finished only
#   every :data:`CHECK_EVERY` tokens (the steps run past the last EOS draw from this call's private
#   generator and are cut off, so the returned tokens and log-probs are those of the lean loop).
#
# Exactness. The draws are the lean decoder's: same prefill, same logits per step, same order of
# random numbers, so on the CPU the tokens equal the lean decoder's for the same seed. With
# ``key_block`` 1 (the CPU default) the step attends over exactly the written keys, as the fast step
# does, and its logits are bit-identical to it (tests: ``torch.equal``); with a larger block the
# masked tail changes SDPA's reduction lengths (see docs/gpu.md for what the tests measured). On a
# GPU the step is checked once per model, device and dtype against the model's forward like the fast
# step (:func:`engine.sampling.fast_step_check.check_fast_step`, kind ``static``); a refused check decodes that call and the
# model's later calls with the lean decoder.
#
# Rows are not refilled: one call's P x K rows decode together until all have finished (a finished
# row keeps computing on pad tokens, as in the lean loop), so the sampled tokens stay those of the
# lean decoder. Refilling freed rows with further prompts would change which random numbers each row
# draws; it is not done.

CHECK_EVERY = 16  # tokens between the host's checks that every row has finished
CUDA_KEY_BLOCK = 64  # keys attended in blocks of this many positions on CUDA (one graph per block)
# the decode step's attention kernels on CUDA: cuDNN's SDPA builds an execution plan per shape (a new key
# length is a new plan), which a one-token step with a growing cache pays again and again; it is left out
DECODE_SDPA_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]




def row_bucket(rows: int, device: torch.device) -> int:
    """Rows of the static buffers for ``rows`` sampled rows: the next power of two on CUDA (graphs
    are reused across calls of that bucket); exactly ``rows`` elsewhere (a spare row would change
    the CPU's matrix-product kernels, hence rounding)."""
    if device.type != "cuda":
        return rows
    return 1 << max(0, (rows - 1).bit_length())


def default_key_block(device: torch.device) -> int:
    return CUDA_KEY_BLOCK if device.type == "cuda" else 1


def _round_up(n: int, block: int) -> int:
    return -(-n // block) * block


def _weight_signature(model: Any) -> tuple[tuple[int, int], ...]:
    """The data pointers and versions' identities of the model's floating tensors: graphs read the
    weights by address, so a replaced tensor means rebuilding them."""
    return tuple((t.data_ptr(), t.numel()) for t in model.parameters())


@dataclass
class DecodeStats:
    """The last static decode call of a model: steps run, wall seconds of its token loop (the host
    waits for the device once at the end), graphs captured in that call."""

    steps: int
    seconds: float
    graphs_captured: int
    rows: int
    bucket: int

    @property
    def step_s(self) -> float:
        return self.seconds / max(1, self.steps)


_stats: weakref.WeakKeyDictionary[Any, DecodeStats] = weakref.WeakKeyDictionary()
_kept: weakref.WeakKeyDictionary[Any, StaticDecoder] = weakref.WeakKeyDictionary()


def last_decode_stats(model: Any) -> DecodeStats | None:
    """The per-step timing of ``model``'s last static decode call (None before one)."""
    return _stats.get(model)


def release(model: Any) -> None:
    """Drop the static cache and graphs kept for ``model`` (they hold rows x max_len keys and values)."""
    _kept.pop(model, None)


class StaticDecoder(FastDecoder):
    """The fast step's layer stack over fixed buffers (see the comment above)."""

    def __init__(self, model: Any, rows: int, max_len: int, key_block: int, graphs: bool) -> None:
        self._read_weights(model)
        kv_heads = model.config.num_key_value_heads
        device, dtype = self.embed.device, self.embed.dtype
        shape = (rows, kv_heads, max_len, self.head_dim)
        self.keys = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(self.num_layers)]
        self.values = [torch.zeros(shape, device=device, dtype=dtype) for _ in range(self.num_layers)]
        self.rows, self.max_len, self.key_block = rows, max_len, key_block
        self.mask = torch.zeros((rows, max_len), dtype=torch.bool, device=device)
        self.ids = torch.zeros((rows, 1), dtype=torch.long, device=device)
        self.pos = torch.zeros((rows, 1), dtype=torch.long, device=device)
        self.col = torch.zeros(1, dtype=torch.long, device=device)
        self.graphs = _graphs_here(graphs, device)
        self.captured: dict[int, tuple[Any, torch.Tensor]] = {}
        self.pool: Any = None
        self.signature = _weight_signature(model)
        self.unmasked = False  # no padding and key_block 1: attend without a mask, as the fast step does
        self.length = 0
        self.new_graphs = 0

    def fits(self, model: Any, rows: int, max_len: int, key_block: int, graphs: bool) -> bool:
        return (self.rows == rows and self.max_len >= max_len and self.key_block == key_block
                and self.graphs == _graphs_here(graphs, self.embed.device)
                and self.signature == _weight_signature(model))

    def load(self, prompt_cache: Any, batch: int, prompt_mask: torch.Tensor | None,
             last_positions: torch.Tensor) -> None:
        """Copy the prompt's keys and values (``batch`` rows, prompt-major) into the buffers; spare
        rows attend to their first (zero) key only. ``prompt_mask`` (batch, Lp) or None (no padding);
        ``last_positions`` (batch, 1) the prompt's last position ids."""
        length = int(_cache_layer(prompt_cache, 0)[0].shape[2])
        for index in range(self.num_layers):
            k, v = _cache_layer(prompt_cache, index)
            self.keys[index][:batch, :, :length] = k
            self.values[index][:batch, :, :length] = v
        self.mask.zero_()
        self.mask[:batch, :length] = True if prompt_mask is None else prompt_mask.bool()
        self.mask[batch:, 0] = True
        self.pos.zero_()
        self.pos[:batch] = last_positions
        self.ids.zero_()
        self.length = length
        self.unmasked = prompt_mask is None and self.key_block == 1
        self.new_graphs = 0

    def _step_static(self, width: int) -> torch.Tensor:
        """One step over the buffers attending to the first ``width`` columns; no host values but
        ``width`` enter it (graph-capturable). On CUDA, SDPA may pick Flash, memory-efficient or math
        kernels, not cuDNN's (see :data:`DECODE_SDPA_BACKENDS`)."""
        if self.embed.device.type == "cuda":
            with sdpa_kernel(DECODE_SDPA_BACKENDS):
                return self._step_body(width)
        return self._step_body(width)

    def _step_body(self, width: int) -> torch.Tensor:
        self.mask.index_fill_(1, self.col, True)
        attn_mask = None if self.unmasked else self.mask[:, None, None, :width]

        def store(index: int, k: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            self.keys[index].index_copy_(2, self.col, k)
            self.values[index].index_copy_(2, self.col, v)
            return self.keys[index][:, :, :width], self.values[index][:, :, :width]

        return self._run(self.ids, self.pos, attn_mask, store)

    def _replay(self, width: int) -> torch.Tensor:
        entry = self.captured.get(width)
        if entry is None:
            try:
                entry = self._capture(width)
            except Exception as exc:  # noqa: BLE001 - any capture failure: run this decoder eagerly from now on
                log.warning("CUDA graph capture of the static decode step failed (%s: %s); the step runs eagerly",
                            type(exc).__name__, exc)
                self.graphs = False
                self.captured.clear()
                return self._step_static(width)
        entry[0].replay()
        return entry[1]

    def _capture(self, width: int) -> tuple[Any, torch.Tensor]:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up outside the capture (it writes what the replay rewrites)
            self._step_static(width)
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph, pool=self.pool, capture_error_mode="thread_local"):
            out = self._step_static(width)
        self.pool = graph.pool()
        self.captured[width] = (graph, out)
        self.new_graphs += 1
        return graph, out

    def step_tokens(self, tokens: torch.Tensor) -> torch.Tensor:
        """Feed one token per sampled row ((batch,) ids on the device) and return the (batch, V)
        logits of the next position (a view of a buffer the next step overwrites)."""
        batch = tokens.shape[0]
        t = self.length
        self.ids[:batch, 0].copy_(tokens)
        self.pos.add_(1)
        self.col.fill_(t)
        width = min(self.max_len, _round_up(t + 1, self.key_block))
        logits = self._replay(width) if self.graphs else self._step_static(width)
        self.length = t + 1
        return logits[:batch]


def _graphs_here(graphs: bool, device: torch.device) -> bool:
    """CUDA graphs are captured on CUDA from the main thread only: agents sampling in worker threads
    (``parallel_training: mp``) may share the device with another agent's kernels, which a capture
    in progress would refuse; there the static step runs eagerly."""
    return graphs and device.type == "cuda" and threading.current_thread() is threading.main_thread()


def _decoder_for(model: Any, rows: int, max_len: int, key_block: int, graphs: bool) -> StaticDecoder:
    """A decoder with these buffers: the one kept for ``model`` when it fits (CUDA graphs), else new."""
    kept = _kept.get(model)
    if kept is not None and kept.fits(model, rows, max_len, key_block, graphs):
        return kept
    _kept.pop(model, None)  # free the old buffers first
    decoder = StaticDecoder(model, rows, max_len, key_block, graphs)
    if decoder.graphs:
        _kept[model] = decoder
    return decoder


def decode_static(model: Any, ids: torch.Tensor, mask: torch.Tensor, num_generations: int, how: Decoding, *,
                  key_block: int | None = None, check_every: int = CHECK_EVERY,
                  graphs: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """The lean decoder's sampling call (:func:`decode_lean`, same arguments
    and results) through :class:`StaticDecoder`; models the fast step does not support, and models
    whose static step failed its check on this device, go through the lean decoder."""
    _stats.pop(model, None)  # set again only by a call that goes through the static path
    device = ids.device
    block = key_block or default_key_block(device)
    k, new = num_generations, how.max_new_tokens
    if check_every < 1:
        raise ValueError(f"check_every must be >= 1, got {check_every}")
    if new < 2 or (needs_check(model, "static") is False and not fast_step_kept(model, "static")):
        return decode_lean(model, ids, mask, k, how)
    cache_key, accepted = _forward_kwargs(model)
    layout = _prefix_layout(model, ids, mask, how, accepted)
    full_ids, full_mask = ids, mask
    if layout is not None:
        full_ids, full_mask = torch.cat([layout.prefix_ids[layout.rows], layout.suffix_ids], dim=1), layout.mask
    prompt_len = full_ids.shape[1]
    max_len = _round_up(prompt_len + new - 1, block)
    if not FastDecoder.supports(model, max_len) or "position_ids" not in accepted:
        return decode_lean(model, ids, mask, k, how)
    batch = full_ids.shape[0] * k
    positions = (full_mask.cumsum(dim=1) - 1).masked_fill(full_mask == 0, 0)
    padded = not bool(full_mask.all())
    optional: dict[str, Any] = {"logits_to_keep": 1} if "logits_to_keep" in accepted else {}
    optional["position_ids"] = None
    logits, cache = _prefill(model, full_ids, full_mask if padded else None, positions, k, how, cache_key,
                             optional, layout)
    if not hasattr(cache, "layers"):
        return decode_lean(model, ids, mask, k, how)
    stepper = _decoder_for(model, row_bucket(batch, device), max_len, block, graphs)
    last = positions[:, -1:].repeat_interleave(k, dim=0)
    stepper.load(cache, batch, full_mask.repeat_interleave(k, dim=0) if padded else None, last)
    check = bool(needs_check(model, "static"))
    if not check:
        cache = None
    rng = None
    if how.seed is not None and how.do_sample:
        rng = torch.Generator(device=device)
        rng.manual_seed(how.seed)
    eos = torch.as_tensor(how.eos_ids, device=device)
    tokens = torch.full((batch, new), how.pad_id, dtype=torch.long, device=device)
    logprobs = torch.zeros((batch, new), dtype=torch.float32, device=device)
    unfinished = torch.ones(batch, dtype=torch.bool, device=device)
    ran = torch.zeros((), dtype=torch.long, device=device)  # steps the lean loop would have run
    next_tokens = tokens[:, 0]
    started = time.perf_counter()
    for step in range(new):
        if step > 0:
            logits = stepper.step_tokens(next_tokens).to(dtype=torch.float32)
            if check:  # the first step on a device where the static step is not known exact
                check = False
                attn = None
                if padded:
                    attn = torch.ones((batch, prompt_len + step), dtype=full_mask.dtype, device=device)
                    attn[:, :prompt_len] = full_mask.repeat_interleave(k, dim=0)
                optional["position_ids"] = last + step
                out = model(input_ids=next_tokens[:, None], attention_mask=attn, use_cache=True, **optional,
                            **{cache_key: cache})
                cache = None
                if not check_fast_step(model, logits, out.logits[:, -1], kind="static"):
                    release(model)
                    return decode_lean(model, ids, mask, k, how)
        if how.do_sample:
            scores = filter_logits(logits, temperature=how.temperature, top_k=how.top_k, top_p=how.top_p)
            drawn = torch.multinomial(scores.softmax(dim=-1), num_samples=1, generator=rng).squeeze(1)
        else:
            drawn = torch.argmax(logits, dim=-1)
        chosen = torch.log_softmax(logits, dim=-1).gather(1, drawn[:, None]).squeeze(1)
        ran += unfinished.any()
        next_tokens = torch.where(unfinished, drawn, how.pad_id)
        tokens[:, step] = next_tokens
        logprobs[:, step] = torch.where(unfinished, chosen, 0.0)
        unfinished &= ~torch.isin(next_tokens, eos)
        if (step + 1) % check_every == 0 and not bool(unfinished.any()):
            break
    steps = int(ran)  # the one wait for the device
    _stats[model] = DecodeStats(steps=steps, seconds=time.perf_counter() - started,
                                graphs_captured=stepper.new_graphs, rows=batch, bucket=stepper.rows)
    return tokens[:, :steps], logprobs[:, :steps]
