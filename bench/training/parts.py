"""The measured parts that need only CoopLab: the engine's trainer, the bare model calls, the decoders."""

from __future__ import annotations

import statistics
import time
from typing import Any

from bench.training.workload import (
    Workload,
    clock,
    dataset,
    formatters,
    length_ratio_reward,
    peak_memory_mb,
    setup_agents,
    summarize,
)


class _ClockSink:
    """Keeps each step's metrics and the wall time between consecutive steps (reporting included)."""

    def __init__(self) -> None:
        from engine.sinks import MemorySink

        self._memory = MemorySink()
        self.marks: list[tuple[float, float]] = [clock()]

    def __getattr__(self, name: str) -> Any:  # every other sink call goes to the memory sink
        return getattr(self._memory, name)

    @property
    def steps(self) -> list[Any]:
        return self._memory.steps

    def mark(self) -> None:
        self.marks = [clock()]

    def log_step(self, step: int, env_step: int, metrics: dict[str, float], episodes: list[Any]) -> None:
        self.marks.append(clock())
        self._memory.log_step(step, env_step, metrics, episodes)


# ---------------------------------------------------------------------------------------------
# the three parts


def run_engine(w: Workload) -> dict[str, Any]:
    """CoopLab's trainer on the workload."""
    from engine import MAGRPOConfig, MAGRPOTrainer

    models, tokenizers = setup_agents(w)
    config = MAGRPOConfig(
        num_train_epochs=1, agent_learning_rate=w.learning_rate, num_generations=w.num_generations,
        max_new_tokens=w.max_new_tokens, temperature=w.temperature, top_p=w.top_p, top_k=w.top_k, num_turns=1,
        rollout_buffer_size=w.items_per_update, logging_steps=1, eval_interval=0, seed=w.seed,
        max_steps=w.total_steps, items_per_step=w.items_per_step, fast_decode=w.fast_decode,
        rollout_dtype=w.rollout_dtype, parallel_training=w.parallel, **({"agent_devices": ["cpu"] * w.num_agents} if w.parallel == "mp" else {}),
    )  # fmt: skip
    sink = _ClockSink()
    trainer = MAGRPOTrainer(
        agents=models, tokenizer=tokenizers, train_dataset=dataset(w), reward_func=length_ratio_reward,
        formatters=formatters(w.num_agents), args=config,
    )  # fmt: skip
    in_threads = trainer.agents_in_threads
    sink.mark()
    try:
        trainer.train(sink=sink)
    finally:
        trainer.close()
    steps = sink.steps[w.warmup_steps :] or sink.steps
    phases = {
        key.split("/")[1]: statistics.fmean(s.metrics[key] for s in steps)
        for key in ("perf/generate_s", "perf/reward_s", "perf/update_s", "perf/step_time_s")
    }
    tokens_per_s = statistics.fmean(s.metrics["perf/tokens_per_s"] for s in steps)
    return {
        **summarize(sink.marks, w),
        "phases": phases,
        "tokens_per_s": tokens_per_s,
        "parallel_training": trainer.args.parallel_training,
        "agents_in_threads": in_threads,
        "dtype": str(next(models[0].parameters()).dtype).removeprefix("torch."),
        "peak_mem_mb": peak_memory_mb(),
    }


def run_bare(w: Workload) -> dict[str, Any]:
    """Only the model calls a step needs: generate per agent and item, one forward/backward, AdamW."""
    import torch
    from transformers import GenerationConfig

    models, tokenizers = setup_agents(w)
    agent_formatters = formatters(w.num_agents)
    data = dataset(w)
    torch.manual_seed(w.seed)
    optimizers = [torch.optim.AdamW(m.parameters(), lr=w.learning_rate) for m in models]
    gen_config = GenerationConfig(
        max_new_tokens=w.max_new_tokens, do_sample=True, temperature=w.temperature, top_p=w.top_p,
        top_k=w.top_k or 0, num_return_sequences=w.num_generations,
    )  # fmt: skip
    marks, gen_times, update_times = [clock()], [], []
    for step in range(w.total_steps):
        items = data[step * w.items_per_update : (step + 1) * w.items_per_update]
        gen_s = upd_s = 0.0
        for model, tok, fmt, opt in zip(models, tokenizers, agent_formatters, optimizers, strict=True):
            g0 = time.perf_counter()
            model.eval()
            rows = []
            with torch.inference_mode():
                for item in items:
                    ids = tok(fmt(item), return_tensors="pt")["input_ids"]
                    gen_config.pad_token_id = tok.pad_token_id
                    out = model.generate(
                        input_ids=ids, attention_mask=torch.ones_like(ids), generation_config=gen_config
                    )
                    rows.extend(out.tolist())
            model.train()
            g1 = time.perf_counter()
            width = max(len(r) for r in rows)
            batch = torch.tensor([[tok.pad_token_id] * (width - len(r)) + r for r in rows])
            mask = (
                torch.arange(width)[None, :] >= torch.tensor([width - len(r) for r in rows])[:, None]
            ).long()
            logits = model(input_ids=batch, attention_mask=mask).logits[:, -w.max_new_tokens - 1 : -1]
            logp = logits.float().log_softmax(-1).gather(2, batch[:, -w.max_new_tokens :, None]).squeeze(2)
            advantages = torch.linspace(-1.0, 1.0, len(rows))
            loss = -(advantages * logp.sum(dim=1)).mean()
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            gen_s += g1 - g0
            upd_s += time.perf_counter() - g1
        marks.append(clock())
        gen_times.append(gen_s)
        update_times.append(upd_s)
    timed = slice(w.warmup_steps, None)
    phases = {
        "generate_s": statistics.fmean(gen_times[timed]),
        "update_s": statistics.fmean(update_times[timed]),
    }
    return {**summarize(marks, w), "phases": phases, "peak_mem_mb": peak_memory_mb()}


def run_decoders(w: Workload, repeats: int = 6) -> dict[str, Any]:
    """The sampling call alone (median CPU s per call): the lean decoder (with its fast Llama step),
    the lean decoder through the model's own forward, and ``generate``; for one prompt (a step's
    item-by-item calls) and for all of a step's prompts at once (batched items)."""
    import torch

    from engine.sampling.sampler import generate_completions

    models, tokenizers = setup_agents(w)
    prompts = [fmt(item) for fmt in formatters(1) for item in dataset(w)[: w.items_per_update]]
    settings = {
        "num_generations": w.num_generations, "max_new_tokens": w.max_new_tokens, "temperature": w.temperature,
        "top_p": w.top_p, "top_k": w.top_k,
    }  # fmt: skip
    variants = {
        "lean": {"decoder": "lean"},
        "lean_modules": {"decoder": "lean", "fast_decode": False},
        "generate": {"decoder": "generate"},
    }
    result: dict[str, Any] = {}
    for label, batch in (("one_prompt", prompts[:1]), ("step_prompts", prompts)):
        cpu: dict[str, list[float]] = {name: [] for name in variants}
        for rep in range(repeats + 1):  # the first round warms up
            for name, options in variants.items():  # interleaved, so load changes hit all alike
                gen = torch.Generator().manual_seed(rep)
                start = time.process_time()
                generate_completions(models[0], tokenizers[0], batch, generator=gen, **options, **settings)
                if rep:
                    cpu[name].append(time.process_time() - start)
        medians = {name: statistics.median(times) for name, times in cpu.items()}
        result[label] = {
            "prompts": len(batch),
            "lean_cpu_s": medians["lean"],
            "lean_modules_cpu_s": medians["lean_modules"],
            "generate_cpu_s": medians["generate"],
            "lean_speedup": medians["generate"] / medians["lean"],
        }
    return result
