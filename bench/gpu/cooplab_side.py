"""CoopLab's side of the benchmark of record: a team trained by ``engine.MAGRPOTrainer``, its phases
read from the trainer's own per-step metrics (``perf/...``), each step's wall clock taken at the
sink with the device synchronised, and the peak memory of the run."""

from __future__ import annotations

import resource
import statistics
import time
from typing import Any

from bench.gpu.roofline import mfu, ratio, update_flops, update_tokens
from bench.gpu.workload import GpuWorkload, SeededReward, dataset, identity_formatters


def synchronize(device: str) -> None:
    """Wait for the device's queued work (a no-op on the CPU)."""
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def reset_peak_memory(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.reset_peak_memory_stats()


def peak_memory(device: str) -> tuple[float, str]:
    """(GiB, what it is): the device's peak allocated memory since the last reset on CUDA; on the CPU
    the process's peak resident memory (all of its life, not this part's alone)."""
    import torch

    if device.startswith("cuda"):
        return torch.cuda.max_memory_allocated() / 2**30, "torch.cuda.max_memory_allocated"
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20, "process peak resident memory (ru_maxrss)"


def make_timed_sink(device: str) -> Any:
    """A :class:`engine.sinks.MemorySink` that also keeps a synchronised clock mark at the start and
    after every step: consecutive marks bound a whole step, queued GPU work included."""
    from engine.sinks import MemorySink

    class TimedSink(MemorySink):
        def __init__(self) -> None:
            super().__init__()
            self.marks: list[float] = []

        def start(self, total_steps: int | None, config: dict) -> None:
            synchronize(device)
            self.marks.append(time.perf_counter())
            super().start(total_steps, config)

        def log_step(self, step: int, env_step: int, metrics: dict[str, float], episodes: list) -> None:
            synchronize(device)
            self.marks.append(time.perf_counter())
            super().log_step(step, env_step, metrics, episodes)

    return TimedSink()


def train_team(models: list[Any], tokenizer: Any, w: GpuWorkload, device: str) -> tuple[Any, Any, SeededReward]:
    """``w.warmup_steps + w.steps`` MAGRPO steps of the team: every step samples its ``w.prompts`` items
    in one call per agent (batch ``prompts x K``) and makes one AdamW step per agent. Returns the
    trainer (still open: its agents are used afterwards), the sink and the reward (what it saw)."""
    from engine import MAGRPOConfig, MAGRPOTrainer

    vocab = models[0].get_output_embeddings().weight.shape[0]
    total = w.warmup_steps + w.steps
    config = MAGRPOConfig(
        num_turns=1, num_generations=w.num_generations, max_new_tokens=w.max_new_tokens, max_steps=total,
        num_train_epochs=1, rollout_buffer_size=w.prompts, eval_interval=0, logging_steps=1,
        agent_learning_rate=w.learning_rate, agent_devices=[device], micro_batch_size=w.micro_batch_size,
        temperature=w.temperature, top_p=w.top_p, top_k=w.top_k, seed=w.seed, transcripts_per_step=0,
    )  # fmt: skip
    sink = make_timed_sink(device)
    reward = SeededReward(w.seed)
    trainer = MAGRPOTrainer(agents=models, tokenizer=[tokenizer] * len(models), reward_func=reward,
                            formatters=identity_formatters(len(models)),
                            train_dataset=dataset(w, total * w.prompts, vocab), args=config)
    trainer.train(sink=sink)
    return trainer, sink, reward


def step_records(sink: Any) -> list[dict[str, float]]:
    """Per step: the synchronised wall seconds and the trainer's phase metrics."""
    walls = [b - a for a, b in zip(sink.marks, sink.marks[1:], strict=False)]
    out = []
    for wall, report in zip(walls, sink.steps, strict=True):
        m = report.metrics
        generate_s = m.get("perf/generate_s", 0.0)
        out.append({
            "step_s": wall, "trainer_step_s": m.get("perf/step_time_s"), "rollout_s": generate_s,
            "reward_s": m.get("perf/reward_s"), "update_s": m.get("perf/update_s"),
            "weight_refresh_s": m.get("perf/weight_sync_s", 0.0),
            "generated_tokens": round(m.get("perf/tokens_per_s", 0.0) * generate_s),
        })  # fmt: skip
    return out


def summarize_team(steps: list[dict[str, float]], w: GpuWorkload, params: int, peak_flops: float | None) -> dict[str, Any]:
    """The timed steps' medians per phase and the derived rates (see :mod:`bench.gpu.roofline`)."""
    timed = steps[w.warmup_steps:] or steps

    def median(key: str) -> float | None:
        values = [s[key] for s in timed if s.get(key) is not None]
        return statistics.median(values) if values else None

    generated = w.generated_tokens_per_step
    tokens = update_tokens(w.prompts, w.prompt_tokens, w.num_generations, w.max_new_tokens, agents=w.num_agents)
    step_s, rollout_s, update_s = median("step_s"), median("rollout_s"), median("update_s")
    flops = update_flops(params, tokens)
    return {
        "step_s": step_s, "trainer_step_s": median("trainer_step_s"), "rollout_s": rollout_s,
        "reward_s": median("reward_s"), "update_s": update_s, "weight_refresh_s": median("weight_refresh_s"),
        "generated_tokens_per_step": generated,
        "generated_tokens_counted": [s["generated_tokens"] for s in steps],
        "s_per_1k_tokens": None if step_s is None else 1000 * step_s / generated,
        "rollout_tokens_per_s": ratio(generated, rollout_s),
        "update_tokens": tokens, "update_tokens_per_s": ratio(tokens, update_s), "update_flops": flops,
        "update_mfu": None if update_s is None else mfu(flops, update_s, peak_flops),
    }  # fmt: skip


def logprob_pass(agent: Any, prompt_ids: list[list[int]], completions: list[list[int]], device: str,
                 num_generations: int) -> dict[str, Any]:
    """The engine's no-grad log-prob pass (:func:`engine.trainer.magrpo.score_logprobs`, what a step
    runs for ``clip_epsilon`` or the reference KL) over one sampling call's batch, timed. A default
    MAGRPO step runs none: the sampler's own log-probs are the old policy's."""
    from engine.trainer.losses import TrainSample
    from engine.trainer.magrpo import score_logprobs

    samples = [TrainSample(node_key=(0, i // num_generations), turn=0, prompt_ids=prompt_ids[i // num_generations],
                           completion_ids=c) for i, c in enumerate(completions)]
    synchronize(device)
    started = time.perf_counter()
    score_logprobs(agent, samples, reference=False)
    synchronize(device)
    seconds = time.perf_counter() - started
    tokens = sum(len(c) for c in completions)
    return {"in_step_s": 0.0, "standalone_s": seconds, "tokens": tokens, "tokens_per_s": ratio(tokens, seconds),
            "note": "a default MAGRPO step makes no separate log-prob pass (the sampler's log-probs are the old "
                    "policy's); standalone_s is engine.trainer.magrpo.score_logprobs over one agent's batch"}
