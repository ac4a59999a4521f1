"""GPU readiness check: the engine's model calls on a CUDA device, on a ~0.5B Qwen2-shaped model.

``scripts/gpu_check.sh`` (or ``python -m cooplab.gpu_check``) builds a model with Qwen2.5-0.5B's
shape (hidden 896, 24 layers, 14 heads / 2 KV heads, MLP 4864, vocabulary 151,936, tied embeddings:
494 M parameters) from a config with random weights (:mod:`bench.shapes`, where the GPU benchmark
builds its models too), and the in-process tokenizer of the tiny models: nothing is downloaded.
Then, on the device:

1. ``placement``: :func:`engine.models.load_agent` puts every weight and buffer there and a forward
   answers there;
2. ``decode``: the engine's sampler (``lean`` decoder; on CUDA its fast token step is checked once
   against the forward, and ``decode_graphs`` auto runs its static CUDA-graph path) against Hugging
   Face ``generate``, greedy, float32; sampling throughput timed on a second call (the first call's
   seconds apart), through the static path, the lean loop and the model's forward.
   Tolerance: the tokens are equal, or where they first differ the model's two candidate logits are
   within ``TIE_TOLERANCE`` (a near-tie that kernel rounding may break either way). Also the
   sampler's per-token log-probs against the update's forward over the same tokens:
   ``max |diff| <= LOGPROB_TOLERANCE[dtype]``;
3. ``bf16``: the same in bfloat16, plus one MAGRPO training step of two agents (weights change, stay
   bfloat16, finite loss);
4. ``mp``: ``parallel_training="mp"`` with both agents on the same GPU (``agent_devices=[dev, dev]``),
   one training step: both agents train, each on the device;
5. ``vllm`` (where the vLLM venv of ``scripts/install_vllm.sh`` exists, else a ``[SKIP]`` line): the
   ``rollout_backend: vllm`` engine's greedy tokens against the lean sampler's, before and after a
   weight sync (the same near-tie tolerance), its sampling throughput and the sync's seconds.

It prints one line per check, sampling throughput (tokens/s) and step time, and peak allocated
memory per check. Without a CUDA device it says so and exits 0 (``--require-gpu``: exit 3); a failed
check exits 1. ``--device cpu --shape tiny`` runs the same checks on a tiny model on the CPU (the
suite's test of this module).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from bench.shapes import SHAPES, build_model  # noqa: F401 (re-exported: the shapes and their builder, shared with bench.gpu)

TIE_TOLERANCE = {"float32": 1e-3, "bfloat16": 0.125}  # logit units: where greedy tokens may differ
LOGPROB_TOLERANCE = {"float32": 1e-3, "bfloat16": 0.25}  # sampler vs update log-probs, per token
PROMPTS = ["Write about a river in spring.", "Explain why teams share information."]
EXIT_FAILED, EXIT_NO_GPU = 1, 3


@dataclass
class Check:
    """One check's outcome, what it measured, and the peak memory while it ran."""

    name: str
    ok: bool
    detail: str
    numbers: dict[str, float] = field(default_factory=dict)


def no_gpu_message() -> str | None:
    """Why there is no CUDA device to check (None when there is one)."""
    import torch

    if torch.cuda.is_available():
        return None
    build = torch.version.cuda or "none (a CPU-only build)"
    return (f"gpu check: no CUDA device: torch.cuda.is_available() is False (torch {torch.__version__}, CUDA "
            f"build {build}). Nothing was checked. Run it on a machine with an NVIDIA GPU and a CUDA build of "
            f"torch (install the CUDA torch first, then the project).")


def _sync(device: str) -> None:
    import torch

    if device.startswith("cuda"):
        torch.cuda.synchronize()


def _measured(device: str, name: str, fn: Callable[[], Check]) -> Check:
    """Run a check, adding its peak allocated memory (CUDA) and wall time."""
    import torch

    cuda = device.startswith("cuda")
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    try:
        result = fn()
    except Exception as exc:  # a check that raises has failed; the others still run
        result = Check(name, False, f"raised {type(exc).__name__}: {exc}")
    _sync(device)
    result.numbers["seconds"] = time.perf_counter() - start
    if cuda:
        result.numbers["peak_mem_gib"] = torch.cuda.max_memory_allocated() / 2**30
    return result


def check_placement(model: Any, tokenizer: Any, device: str) -> Check:
    import torch

    from engine.models import load_agent

    placed, _ = load_agent(model, tokenizer=tokenizer, device=device)
    wrong = [n for n, t in [*placed.named_parameters(), *placed.named_buffers()] if t.device != torch.device(device)
             and not (t.device.type == torch.device(device).type == "cuda" and t.device.index == 0)]
    with torch.no_grad():
        logits = placed(input_ids=torch.tensor([[1, 2, 3]], device=device)).logits
    ok = not wrong and logits.device.type == torch.device(device).type
    params = sum(p.numel() for p in placed.parameters())
    return Check("placement", ok, f"{params / 1e6:.1f} M parameters on {device}" + (f"; off device: {wrong[:3]}"
                 if wrong else ""), {"parameters_m": params / 1e6})


def _first_divergence_gap(model: Any, prompt: list[int], a: list[int], b: list[int]) -> float:
    """|logit(a_t) - logit(b_t)| at the first t where the greedy continuations differ (0 if none)."""
    import torch

    t = next((i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), None)
    if t is None:
        return 0.0
    device = next(model.parameters()).device
    with torch.no_grad():
        logits = model(input_ids=torch.tensor([prompt + a[:t]], device=device)).logits[0, -1].float()
    return abs(float(logits[a[t]] - logits[b[t]]))


def check_decode(model: Any, tokenizer: Any, device: str, *, new_tokens: int, dtype_name: str) -> Check:
    """Greedy lean sampler vs ``generate``, and sampled log-probs vs the update's forward."""
    import torch

    from engine.sampling.sampler import generate_completions
    from engine.trainer.agents import completion_logits, pack_sequences
    from engine.trainer.losses import token_logprobs

    common = dict(num_generations=1, max_new_tokens=new_tokens, temperature=1.0, top_p=1.0, top_k=0,
                  do_sample=False)
    rows: dict[str, list[list[int]]] = {}
    for decoder in ("lean", "generate"):
        gen = generate_completions(model, tokenizer, PROMPTS, decoder=decoder, **common)
        rows[decoder] = [r[m.bool()].tolist() for r, m in zip(gen.completion_ids, gen.completion_mask, strict=True)]
    prompt_ids = [tokenizer(p)["input_ids"] for p in PROMPTS]
    gaps = [_first_divergence_gap(model, p, a, b) for p, a, b in zip(prompt_ids, rows["lean"], rows["generate"],
                                                                     strict=True)]
    equal = sum(a == b for a, b in zip(rows["lean"], rows["generate"], strict=True))
    # sampled completions: the sampler's log-probs against the update's forward over the same tokens. Each
    # way of sampling is timed on its second call: the first pays one-time costs (kernels loaded and tuned
    # for new shapes, CUDA graphs captured) that a training run pays once, reported as first_call_s
    def sample(**how: Any) -> tuple[Any, float]:
        start = time.perf_counter()
        gen = generate_completions(model, tokenizer, PROMPTS, num_generations=4, max_new_tokens=new_tokens,
                                   temperature=1.0, top_p=1.0, top_k=50,
                                   generator=torch.Generator(device=device).manual_seed(0), **how)
        _sync(device)
        return gen, time.perf_counter() - start

    _, first_seconds = sample()
    sampled, seconds = sample()
    sample(decode_graphs="off")
    loop, loop_seconds = sample(decode_graphs="off")  # the lean decoder's own loop (no static path)
    mask = sampled.completion_mask.bool()
    completions = [r[m].tolist() for r, m in zip(sampled.completion_ids, mask, strict=True)]
    prompts_k = [p for p in prompt_ids for _ in range(4)]
    batch = pack_sequences(prompts_k, completions, pad_id=tokenizer.pad_token_id, device=torch.device(device))
    with torch.no_grad():
        forward = token_logprobs(completion_logits(model, batch, batch.completion_ids.shape[1]), batch.completion_ids)
    width = forward.shape[1]
    diff = ((forward.float() - sampled.token_logprobs[:, :width].float()).abs() * batch.completion_mask).max()
    sample(fast_decode=False)
    through_forward, forward_seconds = sample(fast_decode=False)  # through the model's forward (no fast step)
    gap_ok = all(g <= TIE_TOLERANCE[dtype_name] for g in gaps)
    ok = gap_ok and float(diff) <= LOGPROB_TOLERANCE[dtype_name]
    return Check(f"decode_{dtype_name}", ok,
                 f"greedy rows equal to generate: {equal}/{len(PROMPTS)} (first-divergence logit gaps "
                 f"{[round(g, 5) for g in gaps]} <= {TIE_TOLERANCE[dtype_name]}); sampler vs update log-probs max "
                 f"|diff| {float(diff):.2e} <= {LOGPROB_TOLERANCE[dtype_name]}; {_fast_step_line(model)}",
                 {"sample_tokens_per_s": int(mask.sum()) / seconds,
                  "sample_tokens_per_s_loop": loop.num_tokens / loop_seconds,
                  "sample_tokens_per_s_forward": int(through_forward.completion_mask.sum()) / forward_seconds,
                  "first_call_s": first_seconds, "logprob_max_diff": float(diff)})


def _fast_step_line(model: Any) -> str:
    """What the lean decoder decided about the fast token step on this model's device and dtype."""
    from engine.sampling.decoder import needs_check
    from engine.sampling.fast_step_check import fast_step_verdicts

    if needs_check(model) is None:
        return "fast token step: exact on this device (no check needed)"
    verdicts = fast_step_verdicts(model)
    if not verdicts:
        return "fast token step: no check recorded (the model is not supported, or no step followed the prompt)"
    where, v = next(iter(verdicts.items()))
    return (f"fast token step on {where}: {'kept' if v['kept'] else 'refused'} (logits max |diff| "
            f"{v['max_difference']:.2e} vs the forward, allowed {v['allowed']:.2e})")


class _LengthReward:
    """A length reward with a seeded random tie-breaker. On the 0.5B shape almost every sampled id lies
    beyond the tiny tokenizer's 495 tokens and decodes to nothing, so two completions of an item are
    often both empty: a reward of the text alone would tie, every advantage would be zero and no weight
    would move, whatever the trainer does. The tie-breaker keeps the check about the update."""

    def __init__(self, seed: int = 0) -> None:
        import random

        self.rng = random.Random(seed)

    def __call__(self, completions1: list[str], completions2: list[str]) -> list[float]:
        return [len(b) / 100.0 - abs(len(a) - 20) / 100.0 + 1e-3 * self.rng.random()
                for a, b in zip(completions1, completions2, strict=True)]


def check_training(models: list[Any], tokenizer: Any, device: str, *, name: str, new_tokens: int,
                   mp: bool, rollout_dtype: str | None = None) -> Check:
    """One MAGRPO step of two agents on ``device`` (``mp``: both in parallel, on the same device;
    ``rollout_dtype``: sampling from copies in that dtype, which must follow the trained weights)."""
    import torch

    from engine import MAGRPOConfig, MAGRPOTrainer
    from engine.sinks import MemorySink

    before = [next(p for p in m.parameters() if p.requires_grad).detach().clone() for m in models]
    config = MAGRPOConfig(num_turns=1, num_generations=2, max_new_tokens=new_tokens, max_steps=1,
                          num_train_epochs=1, rollout_buffer_size=1, eval_interval=0, logging_steps=1,
                          agent_learning_rate=1e-4, agent_devices=[device, device] if mp else [device],
                          rollout_dtype=rollout_dtype, **({"parallel_training": "mp"} if mp else {}))
    sink = MemorySink()
    trainer = MAGRPOTrainer(agents=models, tokenizer=[tokenizer, tokenizer], reward_func=_LengthReward(),
                            train_dataset=[{"prompt": p} for p in PROMPTS], args=config)
    threads = trainer.agents_in_threads  # mp: always; the default (auto): on a GPU the agents take turns
    try:
        trainer.train(sink=sink)
    finally:
        trainer.close()
    metrics = sink.steps[-1].metrics
    changed = [not torch.equal(b, next(p for p in m.parameters() if p.requires_grad)) for b, m in
               zip(before, models, strict=True)]
    on_device = all(a.device == torch.device(device) or (a.device.type == "cuda" and device == "cuda")
                    for a in trainer.agents)
    dtypes = sorted({str(p.dtype).removeprefix("torch.") for m in models for p in m.parameters()})
    finite = all(v == v for k, v in metrics.items() if isinstance(v, float))  # no NaN in the reported metrics
    ok = all(changed) and on_device and finite and (threads or not mp)  # mp: the agents ran in threads
    copies = ""
    if rollout_dtype is not None:
        fresh = [_copy_follows(a) for a in trainer.agents]
        ok = ok and all(fresh)
        copies = f"sampling copies in {rollout_dtype} follow the weights: {fresh}, "
    return Check(name, ok, f"agents trained: {changed}, on {device}: {on_device}, dtypes {dtypes}, {copies}"
                 f"parallel_training={trainer.args.parallel_training} (agents in threads: {threads}), "
                 f"finite metrics: {finite}",
                 {"step_s": metrics["perf/step_time_s"], "generate_s": metrics["perf/generate_s"],
                  "update_s": metrics["perf/update_s"], "tokens_per_s": metrics["perf/tokens_per_s"]})


def _copy_follows(agent: Any) -> bool:
    """The agent's sampling copy, once refreshed, equals its trained weights cast to the copy's dtype."""
    import torch

    copy_ = agent.rollout_copy
    if copy_ is None or copy_.model.device != next(agent.model.parameters()).device:
        return False
    copy_.refreshed()
    return all(torch.equal(p.to(copy_.dtype), q) for p, q in zip(agent.model.parameters(), copy_.model.parameters(),
                                                                  strict=True))


def check_vllm(model: Any, tokenizer: Any, device: str, *, new_tokens: int, python: Any) -> Check:
    """``rollout_backend: vllm``: the engine's greedy tokens against the lean sampler's, before and
    after a weight sync, its sampling throughput and the sync's seconds."""
    import torch

    from engine.sampling.sampler import generate_completions
    from engine.sampling.vllm_backend import VLLMRollout

    started = time.perf_counter()
    engine = VLLMRollout(model, tokenizer, python=python, device=torch.device(device), seed=0)
    start_s = time.perf_counter() - started
    common = dict(num_generations=1, max_new_tokens=new_tokens, temperature=1.0, top_p=1.0, top_k=0, do_sample=False)
    prompt_ids = [tokenizer(p)["input_ids"] for p in PROMPTS]

    def gaps() -> list[float]:
        ours = engine.generate(PROMPTS, **common)
        lean = generate_completions(model, tokenizer, PROMPTS, **common)
        rows = [[r[m.bool()].tolist() for r, m in zip(g.completion_ids, g.completion_mask, strict=True)]
                for g in (ours, lean)]
        return [_first_divergence_gap(model, p, a, b) for p, a, b in zip(prompt_ids, *rows, strict=True)]
    try:
        before = gaps()
        with torch.no_grad():
            for param in model.parameters():
                param.add_(torch.randn_like(param) * 1e-3)  # a stand-in for an optimizer step
        after = gaps()  # the engine syncs first
        sync_s = engine.take_sync_seconds()
        begin = time.perf_counter()
        sampled = engine.generate(PROMPTS * 4, num_generations=4, max_new_tokens=new_tokens, temperature=1.0,
                                  top_p=1.0, top_k=50, generator=torch.Generator().manual_seed(0))
        seconds = time.perf_counter() - begin
    finally:
        engine.close()
    ok = engine.syncs == 1 and all(g <= TIE_TOLERANCE["float32"] for g in before + after)
    return Check("vllm", ok, f"engine greedy vs lean sampler first-divergence logit gaps {[round(g, 5) for g in before]}, "
                 f"after a weight sync {[round(g, 5) for g in after]} (<= {TIE_TOLERANCE['float32']}); syncs "
                 f"{engine.syncs}", {"start_s": start_s, "weight_sync_s": sync_s,
                                     "sample_tokens_per_s": sampled.num_tokens / seconds})


def run_checks(device: str = "cuda", shape: str = "qwen2-0.5b", new_tokens: int = 32,
               report: Callable[[Check], None] = lambda c: None, vllm_python: Any = None) -> list[Check]:
    """Every check in turn (see the module docstring); ``report`` sees each result as it comes;
    ``vllm_python`` (the vLLM venv's python) adds the ``vllm`` check."""
    import torch

    results: list[Check] = []

    def run(name: str, fn: Callable[[], Check]) -> None:
        results.append(_measured(device, name, fn))
        report(results[-1])

    fp32, tok = build_model(shape, device, torch.float32)
    run("placement", lambda: check_placement(fp32, tok, device))
    run("decode_float32", lambda: check_decode(fp32, tok, device, new_tokens=new_tokens, dtype_name="float32"))
    fp32 = None  # free the float32 model before the two bfloat16 agents
    bf16 = [build_model(shape, device, torch.bfloat16, seed=s)[0] for s in (0, 1)]
    run("decode_bfloat16", lambda: check_decode(bf16[0], tok, device, new_tokens=new_tokens, dtype_name="bfloat16"))
    run("bf16_training",
        lambda: check_training(bf16, tok, device, name="bf16_training", new_tokens=new_tokens, mp=False))
    run("mp_same_device",
        lambda: check_training(bf16, tok, device, name="mp_same_device", new_tokens=new_tokens, mp=True))
    bf16 = None  # free them before two float32 agents
    fp32_team = [build_model(shape, device, torch.float32, seed=s)[0] for s in (0, 1)]
    run("rollout_bfloat16",
        lambda: check_training(fp32_team, tok, device, name="rollout_bfloat16", new_tokens=new_tokens, mp=False,
                               rollout_dtype="bfloat16"))
    if vllm_python is not None:
        fp32_team = None
        served = build_model(shape, device, torch.float32)[0]
        run("vllm", lambda: check_vllm(served, tok, device, new_tokens=new_tokens, python=vllm_python))
    return results


def vllm_python_or_skip(setting: str) -> Any:
    """The vLLM venv's python, or None after printing the line that says the check is skipped."""
    from engine.sampling.vllm_backend import VLLMBackendError, resolve_vllm_python

    try:
        return resolve_vllm_python(setting)
    except VLLMBackendError as exc:
        print(f"[SKIP] vllm: {exc}", flush=True)
        return None


def _operator_vllm_python() -> str:
    """``COOPLAB_VLLM_PYTHON``: the python the workers start vLLM with."""
    from jobs.settings import get_settings

    return get_settings().vllm_python


def _print(check: Check) -> None:
    numbers = ", ".join(f"{k} {v:.3g}" for k, v in check.numbers.items())
    print(f"[{'PASS' if check.ok else 'FAIL'}] {check.name}: {check.detail} ({numbers})", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/gpu_check.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="cuda, cuda:1, ... (cpu: a self-test with --shape tiny)")
    parser.add_argument("--shape", choices=sorted(SHAPES), default="qwen2-0.5b")
    parser.add_argument("--new-tokens", type=int, default=32, help="completion length of every check")
    parser.add_argument("--require-gpu", action="store_true", help=f"exit {EXIT_NO_GPU} when there is no GPU")
    parser.add_argument("--json", action="store_true", help="also print every result as one JSON line")
    parser.add_argument("--vllm-python", default=None,
                        help="the vLLM venv's python (scripts/install_vllm.sh) for the vllm check (default: the "
                             "operator setting COOPLAB_VLLM_PYTHON); skipped without it")
    args = parser.parse_args(argv)
    if args.device.startswith("cuda"):
        message = no_gpu_message()
        if message is not None:
            print(message)
            return EXIT_NO_GPU if args.require_gpu else 0
        import torch

        print(f"gpu check on {torch.cuda.get_device_name(args.device)} (torch {torch.__version__}, "
              f"CUDA {torch.version.cuda}), shape {args.shape}", flush=True)
    vllm_python = vllm_python_or_skip(args.vllm_python or _operator_vllm_python())
    results = run_checks(args.device, args.shape, args.new_tokens, report=_print, vllm_python=vllm_python)
    if args.json:
        print(json.dumps([asdict(r) for r in results]))
    failed = [r.name for r in results if not r.ok]
    print(f"gpu check: {len(results) - len(failed)}/{len(results)} passed" + (f"; failed: {failed}" if failed else ""))
    return EXIT_FAILED if failed else 0


if __name__ == "__main__":
    sys.exit(main())
