"""A fixed training benchmark: CoopLab's trainer against bare model calls and, optionally, CoMLRL.

The workload: N agents (tiny random Llamas by default, one seed each), K samples per agent per
prompt, a fixed number of new tokens, single-turn, two dataset items per update (CoMLRL's default
``rollout_buffer_size``), a length-ratio team reward, and a fixed number of timed steps after a
warm-up step. The measurements, each in its own subprocess so peak memory is per part:

- ``engine``: ``engine.MAGRPOTrainer.train()``, run twice (items one by one as CoMLRL does, and a
  step's items batched); per-step time, the trainer's own phase
  timings (generate / reward / update), tokens per second, peak memory;
- ``bare``: the model calls such a step needs and nothing else: per agent and item one Hugging
  Face ``generate`` (K return sequences), then one padded forward + backward over the step's
  completions and one AdamW step. *Engine overhead* = engine step time / bare step time;
- ``comlrl`` (``--vs-comlrl``): CoMLRL 1.4.3's ``MAGRPOTrainer`` on the same models, data, K and
  lengths; per-step time from the clocks between its updates. *Speed-up* = CoMLRL / engine;
- ``decoders``: one sampling call with the lean decoder (fast token step), the lean decoder through
  the model's own forward, and ``generate``.

Ratios use CPU seconds per step (one torch thread per process), which a shared machine's other
processes barely change; wall-clock ratios are reported next to them.

Run ``python -m bench.training`` or ``cooplab bench``. CoMLRL is an optional benchmark extra:
``pip install --no-deps comlrl==1.4.3 && pip install wandb openai``.
"""

from bench.training.parts import run_bare, run_decoders, run_engine
from bench.training.runner import PARTS, format_report, main, run_bench, run_part
from bench.training.vs_comlrl import COMLRL_INSTALL, ComlrlMissingError, import_comlrl, run_comlrl
from bench.training.workload import Workload, length_ratio_reward, peak_memory_mb

__all__ = [
    "COMLRL_INSTALL",
    "PARTS",
    "ComlrlMissingError",
    "Workload",
    "format_report",
    "import_comlrl",
    "length_ratio_reward",
    "main",
    "peak_memory_mb",
    "run_bare",
    "run_bench",
    "run_comlrl",
    "run_decoders",
    "run_engine",
    "run_part",
]
