"""The benchmark of record's arithmetic (pure functions): device peaks, update FLOPs and MFU, the
decode roofline, and whether a shape's training fits the device's memory.

- **Update MFU** = ``6 * params * update_tokens / update_s / peak_bf16_flops``: a forward and a
  backward cost about 6 FLOPs per parameter and token (attention's own products, which grow with the
  sequence, are not counted). ``update_tokens`` are the tokens the update runs per agent, summed over
  agents: every completion token, and each prompt once for its K completions (the engine encodes a
  shared prompt once, :func:`engine.trainer.agents.completion_logits`).
- **Decode roofline**: a decode step must read every weight once, so at best it takes
  ``weight_bytes / hbm_bytes_per_s``; the fraction is that floor over the measured seconds per
  decode step at the batch. Only weights are counted (the KV cache's reads are left out), so the
  floor is a lower bound and the fraction an upper bound on how close decoding is to the memory wall.

Peaks are the vendors' dense (no sparsity) bfloat16 tensor-core figures and HBM bandwidths.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class DevicePeak:
    """A device's dense bfloat16 peak (FLOP/s) and memory bandwidth (bytes/s)."""

    label: str
    bf16_flops: float
    hbm_bytes_per_s: float


# matched in order: every substring of a row must occur in the lower-cased device name
DEVICE_PEAKS: list[tuple[tuple[str, ...], DevicePeak]] = [
    (("gh200",), DevicePeak("NVIDIA GH200", 989e12, 4.0e12)),  # before H200: "gh200" holds "h200"
    (("h200",), DevicePeak("NVIDIA H200", 989e12, 4.8e12)),
    (("h100", "pcie"), DevicePeak("NVIDIA H100 PCIe", 756e12, 2.0e12)),
    (("h100", "nvl"), DevicePeak("NVIDIA H100 NVL", 835e12, 3.9e12)),
    (("h100",), DevicePeak("NVIDIA H100 SXM", 989e12, 3.35e12)),  # "NVIDIA H100 80GB HBM3"
    (("a100", "40gb"), DevicePeak("NVIDIA A100 40GB", 312e12, 1.555e12)),
    (("a100",), DevicePeak("NVIDIA A100 80GB", 312e12, 2.039e12)),
]


def device_peak(name: str | None) -> DevicePeak | None:
    """The table's row for a device name (``torch.cuda.get_device_name``); None for a CPU or an
    unknown device (its MFU and roofline fraction are then not computed)."""
    if not name:
        return None
    lowered = name.lower()
    return next((peak for keys, peak in DEVICE_PEAKS if all(k in lowered for k in keys)), None)


def update_tokens(prompts: int, prompt_tokens: int, num_generations: int, new_tokens: int, agents: int = 1) -> int:
    """Tokens an update runs: per agent, each prompt once and every completion token."""
    return agents * (prompts * prompt_tokens + prompts * num_generations * new_tokens)


def update_flops(params: int, tokens: int) -> float:
    """Forward + backward FLOPs of ``tokens`` through a model of ``params`` parameters: 6 * N * T."""
    return 6.0 * params * tokens


def mfu(flops: float, seconds: float, peak_flops: float | None) -> float | None:
    """Achieved FLOP/s over the peak; None without a peak or a time."""
    if peak_flops is None or not seconds or seconds <= 0:
        return None
    return flops / seconds / peak_flops


def decode_floor_s(weight_bytes: int, hbm_bytes_per_s: float) -> float:
    """The least time a decode step can take: every weight byte read once at full bandwidth."""
    return weight_bytes / hbm_bytes_per_s


def roofline_fraction(weight_bytes: int, hbm_bytes_per_s: float | None, step_s: float | None) -> float | None:
    """``decode_floor_s / step_s``: 1.0 would be decoding at the memory wall; None without a bandwidth
    or a measured step."""
    if hbm_bytes_per_s is None or step_s is None or step_s <= 0:
        return None
    return decode_floor_s(weight_bytes, hbm_bytes_per_s) / step_s


def per_decode_step_s(full_s: float, one_token_s: float, new_tokens: int) -> float | None:
    """Seconds per decode step from two calls on the same batch, ``new_tokens`` and one token long:
    the difference holds ``new_tokens - 1`` steps and no prompt encoding."""
    if new_tokens < 2:
        return None
    return max(full_s - one_token_s, 0.0) / (new_tokens - 1)


def train_memory_bytes(params: int, agents: int, *, param_bytes: int, micro_rows: int, seq_tokens: int,
                       hidden: int, layers: int, vocab: int, new_tokens: int) -> int:
    """An estimate of a team's peak training memory: per agent its weights, gradients and AdamW's two
    moments (4 copies at ``param_bytes``), plus one micro-batch's activations (about 34 bytes per
    token, hidden unit and layer in half precision) and its logits (the completion rows' bf16 logits
    and their float32 log-softmax, 10 bytes per entry)."""
    state = agents * 4 * params * param_bytes
    activations = micro_rows * seq_tokens * hidden * layers * 34 * param_bytes // 2
    logits = micro_rows * new_tokens * vocab * 10
    return state + activations + logits


def shape_seconds_estimate(last_s: float, last_update_s: float, *, params_ratio: float, layers_ratio: float) -> float:
    """How long a shape's CoopLab parts will take, from the last measured shape's: its update time
    scaled by the parameter count (arithmetic), the rest (decoding, bound by per-layer launches at
    these sizes) by the layer count."""
    update = min(max(last_update_s, 0.0), last_s)
    return (last_s - update) * layers_ratio + update * params_ratio


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    """``numerator / denominator`` where both are known, positive and finite; else None."""
    if numerator is None or denominator is None or denominator <= 0 or not math.isfinite(numerator):
        return None
    return numerator / denominator
