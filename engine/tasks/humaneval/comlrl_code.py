"""CoMLRL's other coding benchmarks, CoopHumanEval and MBPP, read from a dataset in HumanEval's form.

The problems come from the hub names CoMLRL uses (``OpenMLRL/CoopHumanEval``, ``OpenMLRL/MBPP``) when
the machine has them cached or can reach the hub, or from a local ``.jsonl``/``.parquet`` file with
the columns ``prompt``, ``entry_point`` and ``test`` (``test`` defines ``check(candidate)``). The
training and held-out problems are two slices of one list, CoMLRL's by default; slices that share a
problem are refused.
"""

from __future__ import annotations

from engine.schema.task_params import CodeBenchParams
from engine.tasks.base import Task, TaskError
from engine.tasks.datasets import load_cached_items
from engine.tasks.humaneval.task import build_code_task, parse_slice, require_sandbox

COLUMNS = ("prompt", "entry_point", "test")


def bench_problems(name: str, source: str) -> list[dict]:
    """Every problem of ``source`` as an item (prompt, task_id, entry_point, test)."""
    data = load_cached_items(source, task=name)
    missing = [column for column in COLUMNS if column not in data.column_names]
    if missing:
        raise TaskError(f"task {name!r}: dataset {source!r} lacks the column(s) {', '.join(missing)} (columns: "
                        f"{data.column_names}); a coding problem needs prompt, entry_point and test (which defines "
                        "check(candidate)), as in HumanEval")
    items = []
    for index, row in enumerate(data):
        items.append({"prompt": str(row["prompt"]), "task_id": str(row.get("task_id") or f"{name}/{index}"),
                      "entry_point": str(row["entry_point"]), "test": str(row["test"])})
    return items


def held_out_slices(name: str, size: int, train_slice: str, eval_slice: str) -> tuple[range, range]:
    """The training and held-out index ranges over ``size`` problems; overlapping ranges are refused."""
    try:
        train, evals = parse_slice(train_slice, size), parse_slice(eval_slice, size)
    except TaskError as exc:
        raise TaskError(f"task {name!r}: {exc} (the dataset has {size} problems)") from None
    train_range, eval_range = range(train.start, train.stop), range(evals.start, evals.stop)
    shared = set(train_range) & set(eval_range)
    if shared:
        raise TaskError(f"task {name!r}: train_slice {train_slice!r} and eval_slice {eval_slice!r} share "
                        f"{len(shared)} problem(s) (from index {min(shared)}); a held-out result needs disjoint "
                        "slices, e.g. train_slice '16:' with eval_slice '0:16'")
    return train_range, eval_range


def build_code_bench(name: str, params: CodeBenchParams, num_agents: int, *, unisolated_sandbox: bool = False) -> Task:
    require_sandbox(name, unisolated_sandbox)
    problems = bench_problems(name, params.dataset)
    train_range, eval_range = held_out_slices(name, len(problems), params.train_slice, params.eval_slice)
    return build_code_task(name, params, num_agents, [problems[i] for i in train_range],
                           [problems[i] for i in eval_range], unisolated_sandbox=unisolated_sandbox)


def build_coop_humaneval(params: CodeBenchParams, num_agents: int, *, unisolated_sandbox: bool = False) -> Task:
    """CoopHumanEval: HumanEval variants that need cooperation (helper + main, or one coder)."""
    return build_code_bench("coop_humaneval", params, num_agents, unisolated_sandbox=unisolated_sandbox)


def build_mbpp(params: CodeBenchParams, num_agents: int, *, unisolated_sandbox: bool = False) -> Task:
    """MBPP in HumanEval's form (helper + main, or one coder)."""
    return build_code_bench("mbpp", params, num_agents, unisolated_sandbox=unisolated_sandbox)
