"""Issue 39's MADPO learning workload (``python -m bench.training.madpo_learning --workload mixed``).

What a CoMLRL user writes for a first two-agent MADPO test: a byte-level BPE tokenizer (vocabulary
600, ``min_frequency=1``, ``<|endoftext|>`` as bos/eos, ``<|pad|>``, left padding) trained on 40
repetitions of three sentences that mix digits, capitals and lower case; two tiny Llamas (hidden
128, intermediate 344, 2 layers, 4 heads, tied embeddings) built after ``torch.manual_seed(1)`` and
``torch.manual_seed(2)``; 8 prompts "Task {i}: agent one writes digits, agent two writes capitals."
(no formatters: each agent sees the prompt as is); the team reward ``0.5 x digit share of agent 1's
stripped text + 0.5 x capital share of agent 2's``; issue 39's ``MADPOConfig``. A run's seed is the
script's own ``torch.manual_seed(seed)`` (and ``random.seed(seed)``) just before the trainer is
built: CoMLRL samples and shuffles with those global RNGs, and CoopLab's config gives no seed, so it
draws its run seed from the same RNG (:mod:`engine.trainer.setup`).

Issue 39 names the first of the three sentences; the other two are written like it here.
"""

from __future__ import annotations

from typing import Any

SENTENCES = (
    "The team met at 10 and wrote 42 lines. Alpha Beta GAMMA delta 7 8 9.",
    "On day 3 the crew fixed 15 bugs. Omega Sigma TAU rho 1 2 3.",
    "At 6 PM we shipped build 27 to USERS. Kappa Lambda MU nu 4 5 6.",
)
PROMPTS = [f"Task {i}: agent one writes digits, agent two writes capitals." for i in range(8)]

# issue 39's MADPOConfig (CoMLRL's field names), shared by both sides
SETTINGS: dict[str, Any] = dict(
    num_train_epochs=8, agent_learning_rate=1e-3, max_new_tokens=16, temperature=1.0, top_p=1.0, top_k=50,
    num_turns=1, eval_interval=0, rollout_buffer_size=2, train_batch_size=2, preference_num_candidates=8,
    preference_pairs_per_sample=4, pair_selection="reward_gap", dpo_beta=0.1, use_environment_step=True,
    environment_steps_per_pair=2,
)  # fmt: skip
SAMPLES = 4  # answers per prompt and agent in a measurement (issue 39's)
MODEL_SEEDS = (1, 2)


def _share(text: str, test: Any) -> float:
    stripped = text.strip()
    return sum(1 for ch in stripped if test(ch)) / len(stripped) if stripped else 0.0


def digit_share(text: str) -> float:
    """Share of digits in the stripped text (0 for an empty one)."""
    return _share(text, str.isdigit)


def capital_share(text: str) -> float:
    """Share of capital letters in the stripped text (0 for an empty one)."""
    return _share(text, str.isupper)


def team_reward(completions1: list[str], completions2: list[str]) -> list[float]:
    """0.5 x agent 1's digit share + 0.5 x agent 2's capital share, per joint answer."""
    return [0.5 * digit_share(a) + 0.5 * capital_share(b) for a, b in zip(completions1, completions2, strict=True)]


def dataset() -> list[dict[str, str]]:
    return [{"prompt": p} for p in PROMPTS]


def tokenizer() -> Any:
    """The byte-level BPE tokenizer trained on the three sentences (deterministic)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, min_frequency=1, special_tokens=["<|endoftext|>", "<|pad|>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(list(SENTENCES) * 40, trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<|endoftext|>", eos_token="<|endoftext|>",
                                   pad_token="<|pad|>", padding_side="left", clean_up_tokenization_spaces=False)


def agents(seed: int = 0) -> tuple[list[Any], Any]:
    """The two tiny Llamas (``torch.manual_seed(1)`` / ``(2)`` before each, as the issue's script; the
    global RNG is restored afterwards) and their tokenizer. ``seed`` is unused: the agents are the
    same for every run seed."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    tok = tokenizer()
    config = LlamaConfig(vocab_size=len(tok), hidden_size=128, intermediate_size=344, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                         tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                         pad_token_id=tok.pad_token_id)
    models = []
    with torch.random.fork_rng(devices=[]):
        for model_seed in MODEL_SEEDS:
            torch.manual_seed(model_seed)
            models.append(LlamaForCausalLM(config))
    for model in models:
        model.generation_config.pad_token_id = tok.pad_token_id
        model.generation_config.eos_token_id = tok.eos_token_id
    return models, tok
