"""The GPU benchmark of record (``scripts/gpu_bench.sh``, ``python -m bench.gpu``; docs/gpu.md, "The benchmark of record").

Two agents of each real shape (:mod:`bench.shapes`: Qwen2.5-0.5B, 1.5B and, when the memory and the
time budget allow, 3B) with random weights in bfloat16 train on 16 prompts of 128 tokens x K=8 per
step, 256 new tokens with EOS unreachable, 3 timed steps after a warm-up
(:mod:`bench.gpu.workload`). Per shape it reports CoopLab's phases from the trainer's own metrics
(:mod:`bench.gpu.cooplab_side`), the same batch through the engine's sampler and Hugging Face
``generate`` and, for the first shape, in float32 (:mod:`bench.gpu.decode`), and CoMLRL 1.4.3 on the
same script in a subprocess (:mod:`bench.gpu.comlrl_side`); the ratios, update MFU and the fraction
of the decode roofline (:mod:`bench.gpu.roofline`) go into one JSON file (:mod:`bench.gpu.report`).
``--tiny --device cpu`` runs the same script with a tiny shape (the suite's test). Importing this
package imports nothing.
"""
