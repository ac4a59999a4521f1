"""The trainer's AdamW: fused where the parameters allow it, and the same update as torch's loop."""

from __future__ import annotations

import torch

from engine.trainer.setup import make_adamw


def _params(seed: int) -> list[torch.nn.Parameter]:
    gen = torch.Generator().manual_seed(seed)
    return [torch.nn.Parameter(torch.randn(shape, generator=gen)) for shape in ((16, 8), (8,), (3, 4, 5))]


def test_fused_adamw_matches_the_per_tensor_loop() -> None:
    fused_params, loop_params = _params(0), _params(0)
    fused = make_adamw(fused_params, lr=1e-2, weight_decay=0.01)
    loop = torch.optim.AdamW(loop_params, lr=1e-2, weight_decay=0.01, foreach=False)
    assert fused.defaults["fused"] is True
    gen = torch.Generator().manual_seed(1)
    for _ in range(5):
        for a, b in zip(fused_params, loop_params, strict=True):
            grad = torch.randn(a.shape, generator=gen)
            a.grad, b.grad = grad.clone(), grad.clone()
        fused.step()
        loop.step()
    for a, b, start in zip(fused_params, loop_params, _params(0), strict=True):
        assert not torch.equal(a, start)  # the steps moved the weights
        torch.testing.assert_close(a, b, rtol=1e-6, atol=1e-7)


def test_integer_parameters_fall_back_to_the_loop() -> None:
    frozen_int = torch.nn.Parameter(torch.zeros(3, dtype=torch.int64), requires_grad=False)
    optimizer = make_adamw([*_params(0), frozen_int], lr=1e-3, weight_decay=0.0)
    assert not optimizer.defaults["fused"]
