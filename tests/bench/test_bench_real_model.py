"""The real-model benchmark on a built-in model source: equal work (no EOS), the report, bad input."""

from __future__ import annotations

import pytest

from bench.training.real_model import comlrl_installed, format_real_report, run_real_bench
from bench.training.workload import Workload, never_eos, setup_agents

TINY = Workload(model="builtin:tiny-llama", steps=1, warmup_steps=0, max_new_tokens=4, num_generations=2,
                items_per_update=1, full_length=True)


def test_full_length_makes_every_completion_run_to_its_cap() -> None:
    from engine.sampling.sampler import generate_completions

    models, tokenizers = setup_agents(Workload(model="builtin:tiny-llama", num_agents=1, full_length=True))
    pad = tokenizers[0].pad_token
    gen = generate_completions(models[0], tokenizers[0], ["Count to 3:", "Hi"], num_generations=4, max_new_tokens=12,
                               temperature=1.0, top_p=1.0, top_k=0)
    assert gen.completion_mask.sum(dim=1).tolist() == [12] * 8
    assert tokenizers[0].pad_token == pad and tokenizers[0].eos_token_id >= models[0].config.vocab_size
    with pytest.raises(ValueError, match="cannot make EOS unreachable"):
        models[0].resize_token_embeddings(len(tokenizers[0]) + 1)
        never_eos(models[0], tokenizers[0])


def test_real_model_bench_reports_coop_lab_alone_or_against_comlrl() -> None:
    result = run_real_bench(TINY, isolate=False, vs_comlrl=False)
    engine = result["engine"]
    assert engine["tokens_per_step"] == 2 * 1 * 2 * 4 and engine["s_per_1k_tokens"] > 0
    assert engine["step_s_median"] > 0 and set(engine["phases"]) >= {"generate_s", "update_s"}
    assert engine["peak_mem_mb"] > 0 and "comlrl" not in result
    report = format_real_report(result)
    assert "builtin:tiny-llama" in report and "(forced: no EOS)" in report
    expected = "CoMLRL was not asked for" if comlrl_installed() else "CoMLRL is not installed: CoopLab alone"
    assert expected in report and result["comlrl_installed"] == comlrl_installed()


def _on_two_cores(*, vs_comlrl: bool) -> dict:
    import torch

    before = torch.get_num_threads()  # the in-process parts set the thread count
    try:
        return run_real_bench(TINY, isolate=False, vs_comlrl=vs_comlrl, cores=2)
    finally:
        torch.set_num_threads(before)


@pytest.mark.skipif(not comlrl_installed(), reason="CoMLRL 1.4.3 (a benchmark-only extra) is not installed")
def test_real_model_bench_against_comlrl_does_equal_work() -> None:
    result = _on_two_cores(vs_comlrl=True)
    assert result["comlrl"]["tokens_per_step"] == result["engine"]["tokens_per_step"] == 2 * 1 * 2 * 4
    assert result["speedup_cpu"] > 0 and result["comlrl"]["step_s_median"] > 0
    best = min(result["comlrl"]["step_s_median"], result["comlrl_cores"]["step_s_median"])
    assert result["speedup_cores_wall"] == pytest.approx(best / result["engine_cores"]["step_s_median"])
    report = format_real_report(result)
    assert "x CoMLRL per step by CPU time" in report and "CoMLRL's better of 1 and 2 threads" in report


def test_on_two_cores_the_defaults_run_the_agents_in_threads_and_are_weighed_against_none() -> None:
    result = _on_two_cores(vs_comlrl=False)
    assert result["engine_cores"]["agents_in_threads"] and result["engine_cores"]["parallel_training"] == "auto"
    assert not result["engine_cores_sequential"]["agents_in_threads"]
    assert not result["engine"]["agents_in_threads"]  # one thread: the agents take turns
    assert result["auto_gain_wall"] == pytest.approx(
        result["engine_cores_sequential"]["step_s_median"] / result["engine_cores"]["step_s_median"])
    assert "comlrl_cores" not in result and "speedup_cores_wall" not in result
    report = format_real_report(result)
    assert "on 2 cores (wall clock): CoopLab's defaults (agents in threads: True)" in report
    assert "engine_cores_sequential" in report


def test_every_part_can_run_in_bfloat16() -> None:
    from dataclasses import replace

    result = run_real_bench(replace(TINY, dtype="bfloat16"), isolate=False, vs_comlrl=False)
    assert result["engine"]["dtype"] == "bfloat16" and result["engine"]["step_s_median"] > 0
    assert "bfloat16 weights" in format_real_report(result)
    assert run_real_bench(TINY, isolate=False, vs_comlrl=False)["engine"]["dtype"] == "float32"


def test_a_model_source_is_required() -> None:
    from dataclasses import replace

    with pytest.raises(ValueError, match="needs a model source"):
        run_real_bench(replace(TINY, model=None), isolate=False)
