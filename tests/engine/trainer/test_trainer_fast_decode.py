"""Training with the fast decode step is the same run as training through the models' own forwards."""

from __future__ import annotations

import torch

from engine.models.tiny import build_tiny_model
from engine.sinks import MemorySink
from tests.engine.trainer.trainer_helpers import fast_config, make_trainer


def _train(fast_decode: bool) -> tuple[list[dict], list[dict[str, float]]]:
    team = [build_tiny_model("llama", "xs", seed=0), build_tiny_model("qwen2", "xs", seed=1)]
    models = [m for m, _ in team]
    trainer = make_trainer(([m for m, _ in team], [t for _, t in team]),
                           fast_config(fast_decode=fast_decode, max_new_tokens=8, num_generations=3,
                                       clip_epsilon=0.2))  # the sampler's log-probs enter the loss
    sink = MemorySink()
    trainer.train(sink=sink)
    return [m.state_dict() for m in models], [s.metrics for s in sink.steps]


def test_fast_and_module_decoding_train_identically() -> None:
    fast_params, fast_metrics = _train(True)
    module_params, module_metrics = _train(False)
    for fast, module in zip(fast_params, module_params, strict=True):
        assert all(torch.equal(fast[k], module[k]) for k in fast)
    drop = ("perf/",)  # timings differ, everything else is the same run
    for a, b in zip(fast_metrics, module_metrics, strict=True):
        assert {k: v for k, v in a.items() if not k.startswith(drop)} == {
            k: v for k, v in b.items() if not k.startswith(drop)
        }


def test_the_static_decode_path_trains_identically() -> None:
    """decode_graphs on (the static path, eager on the CPU) against off: the same samples, the same run."""
    from engine.sampling.static_decode import last_decode_stats

    runs = []
    for graphs in ("on", "off"):
        team = [build_tiny_model("llama", "xs", seed=0), build_tiny_model("qwen2", "xs", seed=1)]
        trainer = make_trainer(([m for m, _ in team], [t for _, t in team]),
                               fast_config(decode_graphs=graphs, max_new_tokens=8, num_generations=3,
                                           clip_epsilon=0.2))
        assert [a.generation.decode_graphs for a in trainer.agents] == [graphs, graphs]
        sink = MemorySink()
        trainer.train(sink=sink)
        assert all((last_decode_stats(m) is not None) == (graphs == "on") for m, _ in team)
        runs.append(([m.state_dict() for m, _ in team], [s.metrics for s in sink.steps]))
    (on_params, on_metrics), (off_params, off_metrics) = runs
    for a, b in zip(on_params, off_params, strict=True):
        assert all(torch.equal(a[k], b[k]) for k in a)
    for a, b in zip(on_metrics, off_metrics, strict=True):
        assert {k: v for k, v in a.items() if not k.startswith("perf/")} == {
            k: v for k, v in b.items() if not k.startswith("perf/")}
