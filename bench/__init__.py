"""CoopLab's benchmarks, together: each times one layer on a fixed workload and prints what it measured.

- :mod:`bench.training` (``cooplab bench`` or ``python -m bench.training``): training steps of the
  engine against bare model calls and, optionally, CoMLRL 1.4.3 (``docs/benchmarks.md``);
- :mod:`bench.storage` (``python -m bench.storage``): metric insert throughput and series queries
  over a million points, on SQLite and PostgreSQL (``docs/storage.md``);
- :mod:`bench.series_axes` (``python -m bench.series_axes``): a run page's series of 20 keys at 1M
  rows along the step, wall-time and env-step axes;
- :mod:`bench.dashboard` (``python -m bench.dashboard``): every dashboard page's queries and
  headless page runs on 100 runs / 1M points / 100k turns (``docs/dashboard.md``);
- :mod:`bench.sandbox` (``python -m bench.sandbox``): the code sandbox's per-program overhead and
  the 164-problem HumanEval check (``docs/benchmarks.md``);
- :mod:`bench.gpu` (``scripts/gpu_bench.sh`` or ``python -m bench.gpu``): the GPU benchmark of record,
  real shapes in bfloat16 against ``generate``, float32 and CoMLRL 1.4.3, one JSON file (``docs/gpu.md``).

The benchmarks may import every other package; none of those imports them (an import-linter
contract), so no benchmark code ships inside the engine, the store or the app. Importing this
package imports nothing: the storage and dashboard benchmarks never load torch.
"""
