"""The fast token step on devices where its exactness is not established: checked once per model.

On the CPU the fast step (:mod:`engine.sampling.fast_decode`) is bit-identical to the model's forward, which
the test suite verifies with ``torch.equal``. On other devices (CUDA) the attention kernels may take
other algorithms for its strided cache, and bfloat16/float16 round at every product, so no test here
can promise equality. There the lean decoder checks the fast step once per model, device and dtype:
the first decode step runs both ways (the fast step and the model's own forward, over the same
prompt cache) and the fast step is kept when every logit agrees within

    |fast - forward| <= RTOL[dtype] * max(1, max |forward|)

(float32: 1e-4, about a thousand ulps of a logit near 10; bfloat16: 2**-5, four of its eight mantissa
bits; float16: 2**-7). That step's tokens are drawn from the forward's logits either way, and both
caches hold the step's keys and values, so the call continues on whichever path the check chose.
A failed check is logged as a warning naming the difference and the tolerance, and that model
samples through its forward from then on. :func:`fast_step_verdicts` reports what was decided.
"""

from __future__ import annotations

import logging
import weakref
from typing import Any

import torch

log = logging.getLogger(__name__)

EXACT_DEVICE_TYPES = {"cpu"}  # the fast step is bit-identical here (tests compare with torch.equal)
RTOL = {torch.float32: 1e-4, torch.bfloat16: 2.0**-5, torch.float16: 2.0**-7}

# model -> {(device, dtype[, kind]): (kept, max |difference|, allowed)}; kind "static" is the static-shape
# step of engine.sampling.static_decode (its own verdict: it attends over a padded key block)
_verdicts: weakref.WeakKeyDictionary[Any, dict[tuple[str, ...], tuple[bool, float, float]]] = (
    weakref.WeakKeyDictionary())


def _key(model: Any, kind: str = "fast") -> tuple[str, ...]:
    weight = model.get_output_embeddings().weight
    key = (str(weight.device), str(weight.dtype).removeprefix("torch."))
    return key if kind == "fast" else (*key, kind)


def needs_check(model: Any, kind: str = "fast") -> bool | None:
    """None: the fast step is exact on this model's device (nothing to check). True: not checked
    yet on this device and dtype. False: checked; :func:`fast_step_kept` says with what result.
    ``kind`` "static" asks about the static-shape step (:mod:`engine.sampling.static_decode`)."""
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
