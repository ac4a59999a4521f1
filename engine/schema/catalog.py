"""The catalog: each trainer setting's name, type, default, bounds, description and readers, written once.

A class that uses a setting may give it another default (CoMLRL's actor-critic configs default
``top_k`` to ``None``, the run config defaults ``num_turns`` to 1); everything else about the
setting comes from here. ``reads`` names the algorithms whose trainer reads the setting (their
config classes have it), ``compat_only`` those whose config class accepts it from CoMLRL scripts
without reading it, and ``run_config`` where a run config holds it; the config classes, the run
config's sections and the "not used by this algorithm" lists derive from these
(:mod:`engine.schema.derive`, :mod:`engine.schema.algorithms`). ``group`` sorts the settings into
the docs' tables; ``form="main"`` puts a run-config setting in the experiment form's first grid, in
catalog order (the others the run config has are under "Advanced trainer settings"), so the
catalog lists those settings first.
"""

from __future__ import annotations

import typing
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import Field
from pydantic.fields import FieldInfo

# The longest completion a config may ask for; a model's own context (checked by engine.schema.preflight
# before a run is queued) is usually much smaller.
MAX_NEW_TOKENS_LIMIT = 131_072

Algorithm = Literal["magrpo", "grpo", "mareinforce", "maremax", "marloo", "iac", "maac", "madpo",
                    "centralized_magrpo", "marlhf", "madpo_iter", "marlhf_iter"]
ALGORITHMS: tuple[str, ...] = typing.get_args(Algorithm)
# The algorithms whose baseline compares the siblings of a node (its K samples), with that baseline.
ALGORITHM_BASELINES = {"magrpo": "mean", "grpo": "mean", "mareinforce": "raw", "maremax": "max", "marloo": "rloo",
                       "centralized_magrpo": "mean"}
GROUP_BASELINE = tuple(ALGORITHM_BASELINES)
ACTOR_CRITIC = ("iac", "maac")
DPO = ("madpo", "madpo_iter")  # preference pairs, trained by DPO
LEARNED_REWARD = ("marlhf", "marlhf_iter")  # a reward model learned from pairs, then an RL stage
ITERATIVE = ("madpo_iter", "marlhf_iter")  # rounds of pairs against a comparator policy
PAIRS = (*DPO, *LEARNED_REWARD)

# Where a run config holds a setting: "trainer" (its trainer section; an algorithm that does not read it
# refuses a changed value), "build" (its trainer section, read by the build for every algorithm),
# "actor_critic" (the trainer.actor_critic section), "agent" (each agents entry), or None (not in a run
# config: filled from the team, or for library use only).
Placement = Literal["trainer", "build", "actor_critic", "agent"] | None


@dataclass(frozen=True)
class Setting:
    """One trainer setting: its type and pydantic field (default, bounds, description), its group, the
    algorithms that read it (and those that only accept it), where a run config holds it, how a value
    is read before validation (aliases, one device for all) and where the form shows it."""

    annotation: Any
    field: FieldInfo
    group: str
    reads: frozenset[str]
    compat_only: frozenset[str] = frozenset()
    run_config: Placement = "trainer"
    before: Callable[[Any], Any] | None = None
    form: Literal["main", "advanced"] = "advanced"

    @property
    def default(self) -> Any:
        return self.field.default


_RUN_CONFIG_OF_GROUP: dict[str, Placement] = {"actor_critic": "actor_critic", "lora": "agent"}


def _s(group: str, annotation: Any, default: Any, description: str, *, reads: Iterable[str] = ALGORITHMS,
       compat_only: Iterable[str] = (), run_config: Placement | Literal["group"] = "group",
       before: Callable[[Any], Any] | None = None, form: Literal["main", "advanced"] = "advanced",
       **bounds: Any) -> Setting:
    place = _RUN_CONFIG_OF_GROUP.get(group, "trainer") if run_config == "group" else run_config
    return Setting(annotation, Field(default, description=description, **bounds), group, frozenset(reads),
                   frozenset(compat_only), place, before, form)


def _but(*families: tuple[str, ...]) -> tuple[str, ...]:
    """Every algorithm except those of ``families``."""
    left_out = {name for family in families for name in family}
    return tuple(name for name in ALGORITHMS if name not in left_out)


def _aliases(table: dict[str, str]) -> Callable[[Any], Any]:
    """Read a choice case-insensitively, with CoMLRL's spellings (``align``, ``crossed``, ``null``)."""

    def read(value: Any) -> Any:
        key = "none" if value is None else str(value).lower()
        return table.get(key, value)

    return read


def _critic_type(value: Any) -> Any:
    kind = str(value).lower()
    if kind not in ("v", "q"):
        raise ValueError(f"must be 'v' (state value) or 'q' (state-action value), got {value!r}")
    return kind


def _device_list(value: Any) -> Any:
    """One device for all: a single string becomes a one-entry list."""
    return [value] if isinstance(value, str) else value


# booleans are strict=True: "yes" is not a boolean

# Settings that name an executable: the operator's alone, never a run config's (it would run as the worker).
# name -> (the operator's variable, the default earlier run configs stored, dropped when such a config is read)
OPERATOR_SETTINGS: dict[str, tuple[str, str]] = {"vllm_python": ("COOPLAB_VLLM_PYTHON", ".venv-vllm/bin/python")}

CATALOG: dict[str, Setting] = {
    # --- the settings most runs change: the experiment form shows these first, in this order ----
    "algorithm": _s("run", Algorithm, "magrpo", "magrpo/grpo (mean baseline), mareinforce (raw), maremax (max), "
                    "marloo (rloo), iac, maac, madpo (preference pairs, DPO), centralized_magrpo (one "
                    "model writes every role), marlhf (a reward model learned from pairs, then RL), madpo_iter "
                    "and marlhf_iter (rounds of them against a comparator policy).", form="main",
                    reads=(), run_config="build"),
    "num_generations": _s("rollout", int, 4, "K: samples per agent per node of the rollout tree (>= 2 for the "
                          "MAGRPO family).", ge=1, form="main", reads=_but(DPO), compat_only=DPO),
    "num_turns": _s("rollout", int, 2, "Turns per episode; >1 needs a task with a transition.", ge=1,
                    form="main"),
    "joint_mode": _s("rollout", Literal["aligned", "cross"], "aligned", "K joint actions (sample j of every "
                     "agent) or all K^N combinations.",
                     before=_aliases({"aligned": "aligned", "align": "aligned", "cross": "cross", "crossed": "cross"}),
                     form="main", reads=_but(ACTOR_CRITIC)),
    "turn_order": _s("rollout", Literal["simultaneous", "sequential"], "simultaneous",
                     "sequential: agent i also sees the same-turn replies of agents < i.", form="main",
                     reads=_but(ACTOR_CRITIC)),
    "loss_type": _s("optimisation", Literal["seq_sum", "token_mean"], "seq_sum",
                    "seq_sum: sum of token log-probs (CoMLRL); token_mean: average per completion token.",
                    form="main"),
    "agent_learning_rate": _s("optimisation", float, 5e-6, "Default AdamW learning rate per agent.", gt=0,
                              form="main"),
    "num_train_epochs": _s("run", int, 20, "Passes over the training set.", ge=1, form="main"),
    "max_steps": _s("run", int | None, None, "Train exactly this many steps, cycling through the data "
                    "(overrides epochs).", ge=1, form="main"),
    "items_per_step": _s("rollout", int | None, None, "Dataset items sampled together in one call (empty = "
                         "all items of a step at once, the fastest, and one per call in preference "
                         "collection; 1 = CoMLRL's one item at a time, the least sampling memory).", ge=1,
                         form="main"),
    "max_new_tokens": _s("sampling", int, 256, "Completion length cap (tokens; less than the model's context).",
                         ge=1, le=MAX_NEW_TOKENS_LIMIT, form="main"),
    "temperature": _s("sampling", float, 0.6, "Sampling temperature.", gt=0, form="main"),
    "top_p": _s("sampling", float, 0.6, "Nucleus sampling: keep the smallest set of tokens with this mass.",
                gt=0, le=1, form="main"),
    "top_k": _s("sampling", int | None, 50, "Top-k sampling (0 or empty = off). Tiny models learn only with it on.",
                ge=0, form="main"),
    "device": _s("devices", str, "cpu", "Default device for every agent.", form="main",
                 reads=(), run_config="build"),
    "seed": _s("run", int | None, None, "Seeds everything; a seeded CPU run reproduces. Empty (CoMLRL's config "
               "classes): the run continues torch's global RNG, as CoMLRL does (torch.manual_seed(S) before "
               "train() picks the run). A run config always records one.", form="main"),
    "eval_interval": _s("reporting", int, 16, "Evaluate every N steps, step 0 included (0 = never).", ge=0,
                        form="main"),
    "checkpoint_interval": _s("reporting", int, 0, "Checkpoint every N steps (0 = only at the end).", ge=0,
                              form="main"),
    "transcripts_per_step": _s("reporting", int, 2, "Sampled episodes recorded per step.", ge=0, form="main"),
    # --- what to train, and for how long ------------------------------------------------------
    "num_agents": _s("run", int, 2, "Team size, kept for compatibility: like CoMLRL, the team comes from the "
                     "trainer's agents/num_agents.", ge=1, run_config=None),
    "agent_names": _s("run", list[str] | None, None, "Names used in metric keys and transcripts; default "
                      "agent_0, agent_1, ...", run_config=None),
    "shuffle": _s("run", bool, False, "Shuffle the training set each epoch (seeded). CoMLRL never shuffles.",
                  strict=True, reads=_but(DPO)),
    # --- optimisation -------------------------------------------------------------------------
    "weight_decay": _s("optimisation", float, 0.01, "AdamW weight decay.", ge=0),
    "max_grad_norm": _s("optimisation", float | None, 1.0, "Clip each agent's gradient norm (off when empty; "
                        "CoMLRL never clips).", gt=0),
    "lr_scheduler": _s("optimisation", Literal["constant", "linear", "cosine"], "constant",
                       "Learning-rate schedule after warmup.", reads=_but(ACTOR_CRITIC)),
    "warmup_steps": _s("optimisation", int, 0, "Linear warmup steps.", ge=0, reads=_but(ACTOR_CRITIC)),
    "clip_epsilon": _s("optimisation", float | None, None, "PPO-style ratio clipping (off when empty).", gt=0,
                       reads=_but(ACTOR_CRITIC, DPO)),
    "num_inner_epochs": _s("optimisation", int, 1, "Updates over the same rollouts (needs clipping).", ge=1,
                           reads=_but(ACTOR_CRITIC, DPO)),
    "rollout_buffer_size": _s("optimisation", int, 2, "Node samples per agent collected before an update.", ge=1),
    "train_batch_size": _s("optimisation", int | None, None, "Nodes per optimizer step (empty = buffer size).",
                           ge=1),
    "micro_batch_size": _s("optimisation", int | None, None, "Sequences per training forward pass (empty = whole "
                           "mini-batch).", ge=1, reads=_but(ACTOR_CRITIC)),
    "gradient_checkpointing": _s("optimisation", bool, False, "Trade compute for memory in the update.", strict=True),
    "logits_chunk_mib": _s("optimisation", int, 512, "When a forward's float32 logits (sequences x completion "
                           "tokens x vocabulary x 4 bytes) would exceed this many MiB, log-probs and entropy are "
                           "computed from the final hidden states a chunk of positions at a time, never holding "
                           "the whole logits (large vocabularies); 0 = never. Same numbers up to float rounding; "
                           "models whose output layer is not a plain linear one keep the full logits.", ge=0),
    # --- rollout and credit -------------------------------------------------------------------
    "discount": _s("rollout", float, 1.0, "Discount of later-turn rewards in returns: R_t = r_t + discount * "
                   "mean(children's R).", ge=0, le=1, reads=_but(PAIRS), compat_only=PAIRS),
    "collaboration_mode": _s("rollout", Literal["decentralized", "centralized"], "decentralized",
                             "decentralized: one model per agent; centralized: one model writes every role's "
                             "answer in one completion (tagged sections).",
                             before=_aliases({"decentralized": "decentralized", "centralized": "centralized"}),
                             reads=("centralized_magrpo", *PAIRS), run_config="build"),
    "early_termination_threshold": _s("rollout", float | None, None, "Stop expanding a branch when its node's "
                                      "mean reward exceeds this (off when empty; CoMLRL: -0.2).",
                                      reads=_but(PAIRS), compat_only=PAIRS),
    "external_prompt_passthrough": _s("rollout", bool, False, "Use the transition's prompts as they are instead "
                                      "of re-applying the formatters.", strict=True,
                                      reads=_but(PAIRS), compat_only=PAIRS),
    "advantage_mode": _s("rollout", Literal["mean", "raw", "max", "rloo"] | None, "mean",
                         "Baseline among siblings; empty = the algorithm's (mean for MAGRPO).",
                         reads=GROUP_BASELINE, compat_only=PAIRS),
    "advantage_normalization": _s("rollout", bool, True, "z-normalise advantages within each node's group.",
                                  strict=True, reads=_but(DPO), compat_only=DPO),
    "per_agent_normalization": _s("rollout", bool, False, "Also z-normalise each agent's advantages over its "
                                  "whole update batch.", strict=True, reads=_but(ACTOR_CRITIC, DPO)),
    "credit_assignment": _s("rollout", Literal["group", "counterfactual", "turn_group"], "group",
                            "How each agent's advantage is credited from the one team reward. group: against "
                            "its sibling samples at the node (MAGRPO, CoMLRL); counterfactual: against the team "
                            "reward with the agent's sample replaced by its other samples, partners held fixed "
                            "(extra reward calls, no extra generation); turn_group: against every sample the "
                            "agent wrote at that turn of that item's tree (multi-turn).",
                            reads=_but(ACTOR_CRITIC, DPO)),
    "credit_samples": _s("rollout", int, 0, "Joint actions per step whose credit is measured for every agent "
                         "(agent/<name>/credit: the team reward less the reward with that agent's reply left "
                         "empty). Off by default: each costs one extra reward call per agent, with that reply "
                         "removed (perf/credit_reward_calls, perf/credit_s); never measured for one agent.", ge=0,
                         reads=_but(ACTOR_CRITIC, DPO)),
    "reference_kl_enabled": _s("rollout", bool, False, "Penalise divergence from the initial model (k3 KL).",
                               strict=True, reads=_but(DPO), compat_only=DPO),
    "reference_kl_coef": _s("rollout", float, 0.1, "Weight of the reference KL.", ge=0,
                            reads=_but(DPO), compat_only=DPO),
    "reference_kl_mode": _s("rollout", Literal["reward", "loss"], "reward", "reward: subtract the KL from "
                            "returns (CoMLRL); loss: add it to the loss.", reads=_but(ACTOR_CRITIC, DPO)),
    # --- sampling ------------------------------------------------------------------------------
    "fast_decode": _s("sampling", bool, True, "Sample Llama, Qwen2, Qwen3 and Mistral models with the exact fast "
                      "token step (falls back by itself).", strict=True, reads=_but(ACTOR_CRITIC)),
    "decode_graphs": _s("sampling", Literal["auto", "on", "off"], "auto",
                        "Run the fast token step's loop on a static KV cache, replayed from CUDA graphs, with "
                        "no host wait per token (the same tokens as the plain loop on the CPU). auto: on CUDA "
                        "devices; on: everywhere (eager on the CPU); off: the plain loop. Needs fast_decode.",
                        reads=_but(ACTOR_CRITIC)),
    "rollout_dtype": _s("sampling", Literal["auto", "float32", "bfloat16", "float16"] | None, None,
                        "Sample from a copy of each agent's weights in this dtype, refreshed before every "
                        "sampling call; training stays in the model's dtype, and rollout_correction weights the "
                        "update for the difference. auto: a bfloat16 copy of float32 weights where the device "
                        "computes bfloat16 natively (a CPU with AVX512-BF16 or AMX, a GPU with bfloat16), "
                        "otherwise none. Empty (the default): sample from the trained weights. Each agent's "
                        "choice is printed when training starts. LoRA agents sample from their adapters (auto "
                        "leaves them alone)."),
    "rollout_correction": _s("sampling", Literal["auto", "tis", "none"], "auto",
                             "Correct for sampling from a rollout_dtype copy: tis weights each token's "
                             "policy-gradient term by min(p_train / p_sample, tis_cap) (truncated importance "
                             "sampling); auto: tis whenever the sampling copy's dtype differs from the trained "
                             "weights'; none: no correction.",
                             before=_aliases({"auto": "auto", "tis": "tis", "none": "none", "null": "none"}),
                             reads=_but(ACTOR_CRITIC, DPO)),
    "tis_cap": _s("sampling", float, 2.0, "Upper bound of the truncated importance weight of rollout_correction.",
                  ge=1.0, reads=_but(ACTOR_CRITIC, DPO)),
    "rollout_backend": _s("sampling", Literal["hf", "vllm"], "hf",
                          "hf: sample with the built-in decoders over the transformers model; vllm: each model is "
                          "served by a vLLM engine in a process of its own (the optional venv of "
                          "scripts/install_vllm.sh), its weights pushed to it after every optimizer step "
                          "(perf/weight_sync_s). It samples in the model's dtype (rollout_dtype auto is ignored). "
                          "Not with LoRA."),
    "vllm_python": _s("sampling", str, ".venv-vllm/bin/python",
                      "The python of the vLLM venv that rollout_backend: vllm runs its engines with (relative: to "
                      "the working folder, then the project root). scripts/install_vllm.sh makes it. Library use "
                      "only: for runs and the CLI the operator sets COOPLAB_VLLM_PYTHON.",
                      min_length=1, run_config=None),
    # --- devices and models --------------------------------------------------------------------
    "parallel_training": _s("devices", Literal["auto", "none", "mp", "fsdp"], "auto", "auto: the team on one "
                            "device; on a CPU with a thread per agent the agents run concurrently (not with "
                            "dropout), on a GPU one after another; none: one after another (CoMLRL); mp: each "
                            "agent on its own device in agent_devices (a GPU, or 'cpu' for cores of its own), "
                            "generating and updating concurrently; fsdp: each agent sharded over fsdp_ranks ranks "
                            "with FSDP2, cooplab train starting them with torchrun (single-turn MAGRPO/GRPO; "
                            "what is not built yet is refused, docs/gpu.md).",
                            before=_aliases({"auto": "auto", "none": "none", "null": "none", "mp": "mp",
                                             "fsdp": "fsdp"})),
    "fsdp_ranks": _s("devices", int | None, None, "Ranks each agent is sharded over with parallel_training: fsdp "
                     "(empty = every rank of the launch).", ge=1, reads=GROUP_BASELINE),
    "fsdp_cpu_offload": _s("devices", bool, False, "With parallel_training: fsdp, keep each rank's sharded "
                           "parameters, gradients and AdamW state in host memory.", strict=True,
                           reads=GROUP_BASELINE),
    "agent_devices": _s("devices", list[str] | None, None, "Device per agent for mp (one entry is broadcast).",
                         before=_device_list),
    "reference_devices": _s("devices", list[str] | None, None, "Devices of the reference models.",
                            before=_device_list),
    "torch_dtype": _s("devices", Literal["auto", "float32", "bfloat16", "float16"], "float32",
                      "Model dtype (bfloat16 on GPU halves memory).", reads=(), run_config="build"),
    "model_config": _s("devices", dict[str, Any] | None, None, "CoMLRL's model settings: torch_dtype/dtype, "
                       "model_kwargs, special_tokens.", run_config=None),
    # --- LoRA adapters (per agent, in the run config's agents; needs the peft extra) -------------
    "lora_rank": _s("lora", int | None, None, "LoRA rank r: train a low-rank adapter on a frozen base instead of "
                    "every weight (empty = full fine-tuning). Agents sharing weights then share one frozen base.",
                    ge=1, reads=()),
    "lora_alpha": _s("lora", float, 16.0, "LoRA scaling numerator: the adapter's update is scaled by alpha / r.",
                     gt=0, reads=()),
    "lora_dropout": _s("lora", float, 0.0, "Dropout on the adapter's input while training.", ge=0, lt=1,
                       reads=()),
    "lora_target_modules": _s("lora", list[str] | None, None, "Module names that get adapters, e.g. ['q_proj', "
                              "'v_proj'], or ['all-linear']; empty = peft's default for the architecture.",
                              before=_device_list, reads=()),
    # --- evaluation, checkpoints, reporting ----------------------------------------------------
    "logging_steps": _s("reporting", int, 50, "Report metrics every N steps.", ge=1),
    "eval_num_samples": _s("reporting", int, 4, "Evaluation items per evaluation.", ge=0),
    "eval_batch_size": _s("reporting", int, 1, "Evaluation items per generation call.", ge=1,
                          run_config=None),
    "eval_samples_per_item": _s("reporting", int, 1, "Completions per eval item (>1 enables pass@k).", ge=1,
                                reads=_but(ACTOR_CRITIC)),
    "eval_greedy": _s("reporting", bool, False, "Greedy decoding in evaluation (CoMLRL samples).", strict=True),
    "checkpoint_total_limit": _s("reporting", int | None, 3, "Checkpoints kept (oldest removed).", ge=1),
    "best_checkpoint_metric": _s("reporting", str | None, None, "Also keep the checkpoint whose evaluation is best "
                                 "by this metric (e.g. eval/reward_mean, eval/pass@1) in checkpoints/best, never "
                                 "pruned; needs eval_interval > 0 and an eval split.", min_length=6),
    "best_checkpoint_mode": _s("reporting", Literal["max", "min"], "max", "max: a higher best_checkpoint_metric "
                               "is better; min: a lower one."),
    # --- actor-critic (iac, maac) --------------------------------------------------------------
    "critic_type": _s("actor_critic", Literal["v", "q"], "v", "v: value of the history (read before the reply); "
                      "q: value of history and reply.", before=_critic_type,
                      reads=(*ACTOR_CRITIC, "marlhf"), compat_only=("marlhf_iter",)),
    "critic_learning_rate": _s("actor_critic", float | None, 5e-6, "AdamW learning rate of the critics (empty = "
                               "the agents' learning rate).", gt=0,
                               reads=(*ACTOR_CRITIC, "marlhf"), compat_only=("marlhf_iter",)),
    "value_clip_range": _s("actor_critic", float | None, None, "Clip each value's move from its rollout-time "
                           "estimate (empty = unclipped; iac: 0.2).", gt=0,
                           reads=(*ACTOR_CRITIC, "marlhf"), compat_only=("marlhf_iter",)),
    "value_loss_coef": _s("actor_critic", float, 0.6, "Weight of the value loss when actor and value head share "
                          "one optimizer.", ge=0,
                          reads=(*ACTOR_CRITIC, "marlhf"), compat_only=("marlhf_iter",)),
    "use_separate_critic": _s("actor_critic", bool, True, "On: a separate critic model per agent; off: a value "
                              "head on the agent's backbone (iac only).", strict=True,
                              reads=("iac", "marlhf"), compat_only=("marlhf_iter",)),
    "critic_value_head_hidden_dim": _s("actor_critic", int | None, None, "Hidden width of the critic's value "
                                       "head (empty = a linear head).", ge=1,
                                       reads=(*ACTOR_CRITIC, "marlhf"), compat_only=("marlhf_iter",)),
    "value_head_hidden_dim": _s("actor_critic", int | None, None, "Hidden width of a value head on the agent's "
                                "backbone (empty = linear; iac only).", ge=1,
                                reads=("iac", "marlhf"), compat_only=("marlhf_iter",)),
    "critic_model_name": _s("actor_critic", str | None, None, "marlhf with rl_algorithm iac/maac: the critics' "
                            "backbone (HF id, folder or builtin:; empty = a copy of each agent's model).",
                            reads=("marlhf",), compat_only=("marlhf_iter",)),
    "critic_devices": _s("actor_critic", list[str] | None, None, "Device per critic (one is used for all; empty "
                         "= the agent's device).", before=_device_list,
                         reads=(*ACTOR_CRITIC, "marlhf"), compat_only=("marlhf_iter",)),
    # --- preference (madpo) ---------------------------------------------------------------------
    "preference_num_candidates": _s("preference", int, 80, "Joint candidates sampled per item to build preference "
                                    "pairs (each agent samples this many completions).", ge=2, reads=PAIRS),
    "preference_pairs_per_sample": _s("preference", int | None, 16, "Pairs kept per item (empty = every pair "
                                      "with a positive reward gap).", ge=1, reads=PAIRS),
    "pair_selection": _s("preference", Literal["reward_gap", "all", "random", "comparator_reward"], "reward_gap",
                         "Which pairs to keep: largest team-reward gap first, all in candidate order, or a "
                         "seeded random choice; comparator_reward (iterative trainers): largest gap between a "
                         "current and a comparator candidate first.",
                         before=_aliases({"reward_gap": "reward_gap", "all": "all", "random": "random",
                                          "comparator_reward": "comparator_reward"}), reads=PAIRS),
    "dpo_beta": _s("preference", float, 0.1, "DPO inverse temperature on the joint log-prob margin.", gt=0,
                   reads=DPO, compat_only=LEARNED_REWARD),
    "reference_free": _s("preference", bool, False, "Off (default): the margin is taken relative to the frozen "
                         "initial policy (standard DPO; every pair starts at loss log 2); on: CoMLRL's "
                         "reference-free DPO, whose pairs the initial policy already prefers start saturated "
                         "(docs/preference.md).", strict=True, reads=DPO),
    "use_environment_step": _s("preference", bool, True, "env_step counts trained pairs (x environment_steps_per_"
                               "pair, CoMLRL); off: it counts the candidates' reward evaluations.", strict=True,
                               reads=DPO, compat_only=LEARNED_REWARD),
    "environment_steps_per_pair": _s("preference", int, 2, "Environment steps one trained pair counts for.", ge=1,
                                     reads=DPO, compat_only=LEARNED_REWARD),
    # --- iterative preference (madpo_iter) --------------------------------------------------------
    "num_iterations": _s("preference", int, 6, "Rounds of collect-pairs-then-train (iterative trainers).", ge=1,
                         reads=ITERATIVE),
    "comparator_policy": _s("preference", Literal["current", "current_copy", "model", "history", "api"], "current",
                            "Whose candidates the current policy's are compared with: its own (current), a "
                            "second sample of a frozen copy (current_copy), a fixed model (model: "
                            "comparator_model_name / comparator_agents / comparator_checkpoint, else the initial "
                            "policy), the policy comparator_history_k iterations back (history), or an HTTP LLM "
                            "API (api: comparator_api_url).",
                            before=_aliases({**dict.fromkeys(("current", "self", "online"), "current"),
                                             **dict.fromkeys(("current_copy", "copy", "online_copy", "current-offload",
                                                              "current_offload"), "current_copy"),
                                             **dict.fromkeys(("model", "external", "comparator", "reference", "ref"),
                                                             "model"),
                                             **dict.fromkeys(("history", "checkpoint", "previous",
                                                              "previous_iteration"), "history"),
                                             **dict.fromkeys(("api", "http", "endpoint"), "api")}),
                            reads=ITERATIVE),
    "comparator_generation_mode": _s("preference", Literal["decentralized", "centralized"], "decentralized",
                                     "decentralized: every agent's comparator samples its own answer; centralized: "
                                     "one comparator model writes every role's answer in <agent_i> sections.",
                                     before=_aliases({**dict.fromkeys(("decentralized", "decentralised", "multi_agent",
                                                                       "multi-agent"), "decentralized"),
                                                      **dict.fromkeys(("centralized", "centralised", "single_agent",
                                                                       "single-agent"), "centralized")}),
                                     reads=ITERATIVE),
    "comparator_centralized_agent_index": _s("preference", int, 0, "Centralized comparator: whose model (or "
                                             "comparator_agents entry) writes the joint answer.", ge=0,
                                             reads=ITERATIVE),
    "comparator_model_name": _s("preference", str | None, None, "comparator_policy='model': one model (HF id, "
                                "folder or builtin:) every agent's comparator samples with.",
                                reads=ITERATIVE),
    "comparator_agents": _s("preference", list[str] | None, None, "comparator_policy='model': one model per agent "
                            "(or one for all) the comparators sample with.", reads=ITERATIVE),
    "comparator_devices": _s("preference", list[str] | None, None, "Device per comparator model (one is used for "
                             "all; empty = the agent's device).", before=_device_list, reads=ITERATIVE),
    "comparator_num_candidates": _s("preference", int | None, None, "Candidates the comparator samples per item "
                                    "(empty = preference_num_candidates).", ge=1, reads=ITERATIVE),
    "comparator_history_k": _s("preference", int | None, None, "Iterations back for comparator_policy='history' "
                               "(empty = 1).", ge=1, reads=ITERATIVE),
    "preference_replay_mode": _s("preference", Literal["current", "nearest_k", "all_history", "lambda_decay"],
                                 "current", "Which iterations' pairs an iteration trains on (iterative trainers): "
                                 "its own (current), draws over the newest preference_replay_k iterations "
                                 "(nearest_k), over all (all_history), or over all weighted (1-lambda)*lambda^age "
                                 "(lambda_decay).", before=_aliases({"current": "current", "latest": "current", "new": "current", "nearest_k": "nearest_k",
                                                 "recent_k": "nearest_k", "last_k": "nearest_k", "k": "nearest_k",
                                                 "all_history": "all_history", "lambda": "lambda_decay",
                                                 "lambda_decay": "lambda_decay", "td_lambda": "lambda_decay",
                                                 "td-lambda": "lambda_decay"}), reads=ITERATIVE),
    "preference_replay_k": _s("preference", int | None, None, "Iterations drawn from by nearest_k (required there).",
                              ge=1, reads=ITERATIVE),
    "preference_replay_lambda": _s("preference", float | None, None, "Decay of lambda_decay (required there; 1 = "
                                   "uniform, 0 = the newest only).", ge=0, le=1, reads=ITERATIVE),
    "preference_replay_sample_size": _s("preference", int | None, None, "Pairs drawn per iteration by the replay "
                                        "modes other than current (empty = the iteration's own pair count).", ge=1,
                                        reads=ITERATIVE),
    "comparator_checkpoint": _s("preference", str | None, None, "A checkpoint folder (checkpoint-N of an earlier "
                                "run with the same team) whose agent weights the comparator samples with; needs "
                                "comparator_policy='model' (empty: 'model' is the initial policy).",
                                reads=ITERATIVE),
    "comparator_api_url": _s("preference", str | None, None, "comparator_policy='api': the endpoint every "
                             "request is POSTed to (http or https).", reads=ITERATIVE),
    "comparator_api_format": _s("preference", Literal["generic", "openai_chat", "anthropic_messages",
                                                      "openai_responses"], "generic",
                                "Request and response shape: generic (prompt, num_return_sequences -> completions), "
                                "OpenAI chat completions (DeepSeek too), Anthropic messages, OpenAI responses.",
                                before=_aliases({"none": "generic", "generic": "generic",
                                                 **dict.fromkeys(("openai", "openai_chat", "chat", "deepseek"),
                                                                 "openai_chat"),
                                                 **dict.fromkeys(("anthropic", "anthropic_messages", "messages"),
                                                                 "anthropic_messages"),
                                                 **dict.fromkeys(("openai_responses", "responses", "codex"),
                                                                 "openai_responses")}), reads=ITERATIVE),
    "comparator_api_model": _s("preference", str | None, None, "The model name sent to the API.",
                               reads=ITERATIVE),
    "comparator_api_max_n_per_request": _s("preference", int | None, None, "Completions one request may ask for "
                                           "(empty = all at once; 1 for DeepSeek, Anthropic and responses).", ge=1,
                                           reads=ITERATIVE),
    "comparator_api_timeout": _s("preference", float, 120.0, "Seconds one API request may take.", gt=0,
                                 reads=ITERATIVE),
    "comparator_api_retries": _s("preference", int, 2, "Extra attempts of a request the API refused for now (429, "
                                 "5xx) or that failed to connect, with doubling pauses from 1 s (CoopLab).", ge=0,
                                 reads=ITERATIVE),
    "comparator_api_headers": _s("preference", dict[str, str] | None, None, "Extra HTTP headers of every request.",
                                 reads=ITERATIVE),
    "comparator_api_key": _s("preference", str | None, None, "The API key itself (library use only: a run config "
                             "names the variable instead, comparator_api_key_env, so no key is stored).",
                             reads=ITERATIVE, run_config=None),
    "comparator_api_key_env": _s("preference", str | None, None, "The environment variable holding the API key "
                                 "(read by the process that trains).", reads=ITERATIVE),
    "comparator_api_key_header": _s("preference", str, "Authorization", "Header that carries the key (Anthropic: "
                                    "x-api-key).", reads=ITERATIVE),
    "comparator_api_key_prefix": _s("preference", str, "Bearer", "Text before the key in its header (none for "
                                    "Anthropic).", reads=ITERATIVE),
    "comparator_api_response_field": _s("preference", str, "completions", "generic format: the dotted path of the "
                                        "completions in the JSON answer.", reads=ITERATIVE),
    "comparator_api_extra_body": _s("preference", dict[str, Any] | None, None, "Fields merged into every request's "
                                    "JSON body.", reads=ITERATIVE),
    "policy_checkpoint_dir": _s("preference", str | None, None, "Also write each iteration's policy (the comparator "
                                "snapshots) here as model files (relative: under the run's output folder; a run config's folder must "
                                "stay in the run's folder or the data directory).", reads=ITERATIVE),
    "preference_replay_dir": _s("preference", str | None, None, "Also write each iteration's pairs here as JSON "
                                "lines (relative: under the run's output folder; a run config's folder must stay "
                                "in the run's folder or the data directory).", reads=ITERATIVE),
    "log_reward_distribution": _s("preference", bool, False, "Log each iteration's team-reward distribution of the "
                                  "current, comparator, winner and loser candidates, and write it as JSON + SVG "
                                  "under reward_distribution/ of the output folder.", strict=True,
                                  reads=ITERATIVE),
    # --- learned reward (marlhf) ---------------------------------------------------------------
    "rl_algorithm": _s("preference", Literal["magrpo", "mareinforce", "maremax", "marloo", "iac", "maac"], "magrpo",
                       "The trainer that optimises the team against the learned reward: a MAGRPO-family baseline, "
                       "or actor-critic (iac, maac; their critic settings apply).",
                       before=_aliases({"magrpo": "magrpo", "mareinforce": "mareinforce", "mareforce": "mareinforce",
                                        "maremax": "maremax", "marloo": "marloo", "iac": "iac", "maac": "maac"}),
                       reads=LEARNED_REWARD),
    "reward_model_name": _s("preference", str | None, None, "Backbone of the reward model (HF id or folder; "
                            "empty = a copy of the first agent's model).", reads=LEARNED_REWARD),
    "reward_model_device": _s("preference", str | None, None, "Device of the reward model (empty = the first "
                              "agent's; CoMLRL: cuda:0).", reads=LEARNED_REWARD),
    "reward_learning_rate": _s("preference", float, 1e-5, "AdamW learning rate of the reward model.", gt=0,
                               reads=LEARNED_REWARD),
    "reward_num_train_epochs": _s("preference", int, 1, "Passes of the reward model over the pairs.", ge=1,
                                  reads=LEARNED_REWARD),
    "reward_train_batch_size": _s("preference", int, 1, "Pairs per reward-model optimizer step.", ge=1,
                                  reads=LEARNED_REWARD),
    "reward_max_length": _s("preference", int | None, None, "Tokens the reward model reads per joint answer "
                            "(the last ones; empty = all).", ge=2, reads=LEARNED_REWARD),
    "reward_freeze_backbone": _s("preference", bool, False, "Train only the reward model's head.", strict=True,
                                 reads=LEARNED_REWARD),
    "preference_scoring_reward": _s("preference", Literal["task", "reward_model"], "task",
                                    "marlhf_iter: what labels an iteration's pairs: the task's team reward, or "
                                    "(reward_model) the reward model learned so far (the first iteration: the task's).",
                                    before=_aliases({**dict.fromkeys(("task", "oracle", "environment", "env"), "task"),
                                                     **dict.fromkeys(("reward_model", "model", "learned"),
                                                                     "reward_model")}),
                                    reads=("marlhf_iter",)),
}

FORM_MAIN = tuple(name for name, setting in CATALOG.items() if setting.form == "main")
"""The run-config settings the experiment form shows first, in catalog order."""

# CoMLRL 1.4.3's config fields, in its order: a config class lists its family's first, so a CoMLRL script's
# MAGRPOConfig(...) or IACConfig(...) call works unchanged, by keyword or by position; the class's other
# settings follow in catalog order. Which settings a class has comes from each setting's reads/compat_only.
_COMLRL_REINFORCE = (  # MAGRPOConfig, and the preference configs built on it
    "num_train_epochs", "agent_learning_rate", "logging_steps", "num_agents", "parallel_training", "agent_devices",
    "num_generations", "max_new_tokens", "temperature", "top_p", "top_k", "num_turns", "discount", "joint_mode",
    "early_termination_threshold", "external_prompt_passthrough", "eval_interval", "eval_num_samples",
    "eval_batch_size", "rollout_buffer_size", "train_batch_size", "advantage_normalization", "advantage_mode",
    "reference_kl_enabled", "reference_kl_coef", "reference_devices",
)
_COMLRL_ACTOR_CRITIC = (  # the fields IACConfig and MAACConfig share
    "agent_learning_rate", "critic_learning_rate", "rollout_buffer_size", "train_batch_size", "value_loss_coef",
    "advantage_normalization", "max_new_tokens", "temperature", "top_p", "top_k", "num_train_epochs",
    "critic_type", "critic_value_head_hidden_dim", "num_agents", "num_turns", "parallel_training",
    "agent_devices", "critic_devices", "external_prompt_passthrough", "discount", "num_generations",
    "eval_interval", "eval_num_samples", "eval_batch_size", "early_termination_threshold", "logging_steps",
    "reference_kl_enabled", "reference_kl_coef", "reference_devices",
)
COMLRL_ORDER = {"reinforce": _COMLRL_REINFORCE, "actor_critic": _COMLRL_ACTOR_CRITIC}
