"""The decoders: the sampler the trainers call, the lean token loop, its fast step, the shared-prefix
cache, and the vLLM rollout backend (a client here, its server run with the vLLM venv's python)."""
