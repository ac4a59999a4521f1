"""Agents sharded over several ranks with FSDP2 (``parallel_training: fsdp``, issue 43).

:mod:`engine.distributed.groups` splits a step's prompts over the ranks (pure, torch-free);
:mod:`engine.distributed.fsdp` shards an agent over a device mesh and runs one policy-gradient
update of the ranks' rollouts; :mod:`engine.distributed.rollouts` samples each rank's groups. What is built and what is not: docs/gpu.md.
"""
