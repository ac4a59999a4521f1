"""The check of the fast token step where its exactness is not known (devices other than the CPU):
one decode step's logits compared with the model's forward, once per model, device and dtype, and
the verdicts recorded (:func:`check_fast_step`, :func:`fast_step_verdicts`).

The lean decoder (:mod:`engine.sampling.decoder`: :func:`~engine.sampling.decoder.needs_check` and
:func:`~engine.sampling.decoder.fast_step_kept`) and the static-shape loop
(:mod:`engine.sampling.static_decode`) ask for the check; on the CPU none runs.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

import torch

log = logging.getLogger("engine.sampling.decoder")  # the lean decoder's log, where its warnings always went

# The fast token step on devices where its exactness is not established: checked once per model.
#
# On the CPU the fast step (engine.sampling.decoder.FastDecoder) is bit-identical to the model's forward, which
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


RTOL = {torch.float32: 1e-4, torch.bfloat16: 2.0**-5, torch.float16: 2.0**-7}

# model -> {(device, dtype[, kind]): (kept, max |difference|, allowed)}; kind "static" is the static-shape
# step of engine.sampling.static_decode (its own verdict: it attends over a padded key block)
_verdicts: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], tuple[bool, float, float]]] = (
    weakref.WeakKeyDictionary())


def _key(model: Any, kind: str = "fast") -> tuple[str, ...]:
    weight = model.get_output_embeddings().weight
    key = (str(weight.device), str(weight.dtype).removeprefix("torch."))
    return key if kind == "fast" else (*key, kind)


def recorded_verdict(model: Any, kind: str = "fast") -> tuple[bool, float, float] | None:
    """``(kept, max |difference|, allowed)`` recorded for ``model`` on its device and dtype (``kind``
    "static": the static-shape step's), or None when no check ran there yet."""
    return _verdicts.get(model, {}).get(_key(model, kind))


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
