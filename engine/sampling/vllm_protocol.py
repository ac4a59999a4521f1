"""The wire between the trainer and its vLLM rollout server (:mod:`engine.sampling.vllm_server`).

vLLM pins a ``transformers`` older than the project's, so it lives in a venv of its own
(``scripts/install_vllm.sh``) and runs as a child process of the trainer. The two talk over the
child's stdin and stdout: each message is one JSON object, UTF-8, behind an 8-byte big-endian length.
Weights do not travel in messages: the trainer writes them to a safetensors file and names it.

This module is standard library only, so both venvs import it. Requests (``op``):

- ``load``: start the engine on a saved model folder (``model``, ``dtype``, ``seed``, ``engine``
  keyword arguments for ``vllm.LLM``).
- ``generate``: ``prompts`` (token-id lists) and ``params`` (:func:`sampling_params`); the reply's
  ``completions[p][k]`` holds ``token_ids`` and ``logprobs`` (the log-prob of each sampled token
  under the unmodified policy).
- ``sync``: ``weights``, the path of a safetensors file of named tensors; the engine reloads them and
  drops its prefix cache. The reply says how long the engine took (``engine_s``).
- ``close``: stop the engine and exit.

Every reply has ``ok``; a failed request answers ``ok: false`` with ``error`` and ``traceback``.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Sequence
from typing import IO, Any

HEADER = struct.Struct(">Q")
MAX_MESSAGE = 1 << 31  # a larger length means the stream is out of step (a stray print on it)


def encode_message(obj: Any) -> bytes:
    """One framed message: the 8-byte length, then the JSON bytes."""
    body = json.dumps(obj, separators=(",", ":")).encode("utf-8")
    return HEADER.pack(len(body)) + body


def write_message(stream: IO[bytes], obj: Any) -> None:
    stream.write(encode_message(obj))
    stream.flush()


def _read_exact(stream: IO[bytes], size: int) -> bytes:
    chunks: list[bytes] = []
    left = size
    while left:
        chunk = stream.read(left)
        if not chunk:
            raise EOFError(f"the stream ended {left} bytes before the end of a {size}-byte read")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def read_message(stream: IO[bytes]) -> Any:
    """The next message; EOFError when the stream ends cleanly before a header."""
    head = stream.read(HEADER.size)
    if not head:
        raise EOFError("the stream ended")
    if len(head) < HEADER.size:
        head += _read_exact(stream, HEADER.size - len(head))
    (size,) = HEADER.unpack(head)
    if size > MAX_MESSAGE:
        raise ValueError(f"message length {size} is not plausible: something other than the protocol wrote "
                         f"to the stream")
    return json.loads(_read_exact(stream, size).decode("utf-8"))


def sampling_params(*, max_new_tokens: int, temperature: float, top_p: float, top_k: int | None,
                    greedy: bool, stop_token_ids: Sequence[int], seed: int | None) -> dict[str, Any]:
    """The keyword arguments of ``vllm.SamplingParams`` for one sample of the trainer's settings.

    Greedy decoding is temperature 0; a top_k of None or 0 is vLLM's "off" (-1). Generation stops
    at any of ``stop_token_ids`` (the EOS ids, kept in the output as the lean decoder keeps them) or
    after ``max_new_tokens``. ``logprobs=0`` returns the sampled token's log-prob, which vLLM takes
    from the raw logits (before temperature and filters), as the lean decoder does.
    """
    return {
        "n": 1,
        "max_tokens": int(max_new_tokens),
        "temperature": 0.0 if greedy else float(temperature),
        "top_p": 1.0 if greedy else float(top_p),
        "top_k": -1 if greedy or not top_k else int(top_k),
        "min_p": 0.0,
        "repetition_penalty": 1.0,
        "presence_penalty": 0.0,
        "frequency_penalty": 0.0,
        "stop_token_ids": [int(i) for i in stop_token_ids],
        "ignore_eos": False,
        "skip_special_tokens": False,
        "detokenize": False,
        "logprobs": 0,
        "seed": None if greedy or seed is None else int(seed),
    }


def sample_seeds(base: int, num_prompts: int, num_generations: int) -> list[list[int]]:
    """A distinct seed per sample (row ``p * K + k`` gets ``base + p * K + k``), kept in 63 bits."""
    return [[(base + p * num_generations + k) % (1 << 63) for k in range(num_generations)]
            for p in range(num_prompts)]


def trim_completion(token_ids: Sequence[int], logprobs: Sequence[float], eos_ids: Sequence[int],
                    ) -> tuple[list[int], list[float]]:
    """A completion up to and including its first EOS (what the lean decoder's mask keeps)."""
    eos = set(int(i) for i in eos_ids)
    ids = [int(t) for t in token_ids]
    for pos, tok in enumerate(ids):
        if tok in eos:
            return ids[:pos + 1], [float(x) for x in logprobs[:pos + 1]]
    return ids, [float(x) for x in logprobs[:len(ids)]]
