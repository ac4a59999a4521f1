"""``cooplab bench``: the fixed training benchmark (engine vs bare model calls, optionally vs CoMLRL)."""

from __future__ import annotations

import json
import os

import typer


def register(app: typer.Typer) -> None:
    """Add the ``bench`` command to the CLI."""

    @app.command("bench")
    def bench(
        vs_comlrl: bool = typer.Option(
            False, "--vs-comlrl", help="Also run CoMLRL 1.4.3's trainer of the same algorithm on the same workload."
        ),
        algorithm: str = typer.Option(
            "magrpo", "--algorithm", help="magrpo (default) or madpo: MADPO's collection and DPO steps "
                                          "(bench.training.madpo)."
        ),
        steps: int = typer.Option(5, "--steps", min=1, help="Timed training steps (after one warm-up step)."),
        size: str = typer.Option("m", "--size", help="Tiny model size: xs, s or m."),
        threads: int = typer.Option(1, "--threads", min=1, help="torch CPU threads per process."),
        rounds: int = typer.Option(1, "--rounds", min=1, help="Interleaved repetitions of every part."),
        cores: int = typer.Option(
            min(2, os.cpu_count() or 1), "--cores", min=1,
            help="Also compare on this many cores by wall clock: the engine's agents in parallel "
                 "(tiny: parallel_training='mp' on CPU; --model: the defaults, which run the agents in "
                 "threads) vs CoMLRL with as many torch threads. 1 skips it.",
        ),
        as_json: bool = typer.Option(False, "--json", help="Print the result as JSON."),
        no_fast_decode: bool = typer.Option(
            False, "--no-fast-decode", help="Engine parts sample through the model's forward (no fast token step)."
        ),
        model: str | None = typer.Option(
            None, "--model", help="Benchmark a real model instead (builtin:smollm2-135m or a model folder): "
                                  "CoopLab, and CoMLRL when installed, on equal work (bench.training.real_model)."
        ),
        max_new_tokens: int | None = typer.Option(
            None, "--max-new-tokens", min=1, help="Completion length (default 32; 48 with --model)."
        ),
        dtype: str | None = typer.Option(
            None, "--dtype", help="Weights' dtype for every part, CoMLRL's included (float32 or bfloat16; "
                                  "default: the model's own). bfloat16 is fast on GPUs and CPUs with AMX or AVX512-BF16."
        ),
        rollout_dtype: str | None = typer.Option(
            None, "--rollout-dtype", help="With --model: also run CoopLab sampling from a copy of the weights in "
                                          "this dtype (bfloat16), training in the weights' own (extra parts)."
        ),
    ) -> None:
        """Time training steps of 2 tiny agents (K=4, 32 new tokens): phases, tokens/s, peak memory,
        engine overhead over the bare model calls, and with --vs-comlrl the speed-up over CoMLRL; on
        several cores also the engine with its agents in parallel, by wall clock."""
        from dataclasses import replace

        from bench.training import ComlrlMissingError, Workload, format_report, run_bench

        if dtype not in (None, "float32", "bfloat16"):
            raise typer.BadParameter(f"unknown dtype {dtype!r}; expected float32 or bfloat16", param_hint="--dtype")
        if rollout_dtype not in (None, "float32", "bfloat16", "float16"):
            raise typer.BadParameter(f"unknown dtype {rollout_dtype!r}; expected bfloat16, float16 or float32",
                                     param_hint="--rollout-dtype")
        if model is not None:
            _real_model_bench(model, steps, rounds, threads, max_new_tokens, vs_comlrl, as_json, no_fast_decode,
                              cores, dtype, rollout_dtype)
            return
        if rollout_dtype is not None:
            raise typer.BadParameter("--rollout-dtype needs --model (the real-model benchmark)",
                                     param_hint="--rollout-dtype")
        if size not in ("xs", "s", "m"):
            raise typer.BadParameter(f"unknown size {size!r}; expected xs, s or m", param_hint="--size")
        if algorithm not in ("magrpo", "madpo"):
            raise typer.BadParameter(f"unknown algorithm {algorithm!r}; expected magrpo or madpo",
                                     param_hint="--algorithm")
        workload = replace(Workload(), steps=steps, size=size, threads=threads, fast_decode=not no_fast_decode,
                           dtype=dtype, **({"max_new_tokens": max_new_tokens} if max_new_tokens else {}))
        try:
            if algorithm == "madpo":
                from bench.training.madpo_compare import format_madpo_report, run_madpo_bench

                result = run_madpo_bench(workload, vs_comlrl=vs_comlrl, rounds=rounds)
                typer.echo(json.dumps(result, indent=2) if as_json else format_madpo_report(result))
                return
            result = run_bench(workload, vs_comlrl=vs_comlrl, rounds=rounds, cores=cores)
        except ComlrlMissingError as exc:
            typer.echo(str(exc), err=True)
            raise typer.Exit(2) from exc
        typer.echo(json.dumps(result, indent=2) if as_json else format_report(result))


def _real_model_bench(model: str, steps: int, rounds: int, threads: int, max_new_tokens: int | None,
                      vs_comlrl: bool, as_json: bool, no_fast_decode: bool, cores: int, dtype: str | None,
                      rollout_dtype: str | None = None) -> None:
    """``cooplab bench --model ...``: see :mod:`bench.training.real_model`."""
    from dataclasses import replace

    from bench.training import ComlrlMissingError, Workload
    from bench.training.real_model import REAL_DEFAULTS, format_real_report, run_real_bench

    settings = {**REAL_DEFAULTS, "steps": steps, **({"max_new_tokens": max_new_tokens} if max_new_tokens else {})}
    workload = replace(Workload(), model=model, threads=threads, fast_decode=not no_fast_decode, dtype=dtype,
                       rollout_dtype=rollout_dtype, **settings)
    try:
        result = run_real_bench(workload, rounds=rounds, vs_comlrl=vs_comlrl or None, cores=cores)
    except (ComlrlMissingError, RuntimeError) as exc:
        typer.echo(str(exc), err=True)
        raise typer.Exit(2) from exc
    typer.echo(json.dumps(result, indent=2) if as_json else format_real_report(result))
