"""The decoders: the sampler the trainers call, the lean token loop, its fast step and the shared-prefix
cache."""
