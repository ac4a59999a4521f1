"""The vLLM rollout server: one ``vllm.LLM`` engine serving one agent model to the trainer.

Run by :mod:`engine.sampling.vllm_backend` as ``<vllm venv>/bin/python -m engine.sampling.vllm_server``
from the repository root: it needs only the vLLM venv (``scripts/install_vllm.sh``) and the standard
library, never the trainer's packages. Requests come on stdin and replies leave on stdout in the
framing of :mod:`engine.sampling.vllm_protocol`; vLLM's own logging, which prints to stdout, is moved
to stderr first so nothing else ever writes on the reply stream.

Before the engine starts, ``tcp://`` rendezvous on a loopback host is routed through a store bound to
that address (:mod:`engine.sampling.loopback_store`; the client sets ``VLLM_HOST_IP=127.0.0.1``), so the
engine's torch.distributed store does not listen on the machine's other addresses.

The engine runs in this process (``VLLM_ENABLE_V1_MULTIPROCESSING=0``, set by the client), so a
weight sync hands the worker the tensors without copying them to another process. A sync calls
``worker.reload_weights(weights_iterator=...)`` through ``collective_rpc`` (``LLM`` has no weight
update of its own, and a direct ``model.load_weights`` fails on the CPU in float32, whose linear
layers drop their weight after packing) and then resets the prefix cache, so no prompt is served
from keys computed with the old weights.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Any

from engine.sampling.loopback_store import install_loopback_store
from engine.sampling.vllm_protocol import read_message, write_message


def _reload(worker: Any, items: list[tuple[str, Any]]) -> None:
    """Reload the weights in the worker, then re-prepare a tied output layer.

    vLLM's CPU linear layers pack their weight once, when it is loaded. An output layer tied to the
    embedding receives no weight of its own in a reload, so its packed copy would keep the old
    embedding: preparing it again packs the new one (on a GPU this reads the shared weight as before).
    """
    worker.reload_weights(weights_iterator=iter(items))
    model = worker.model_runner.model
    head = getattr(model, "lm_head", None)
    embed = getattr(getattr(model, "model", None), "embed_tokens", None)
    method = getattr(head, "quant_method", None)
    tied = head is not None and embed is not None and getattr(head, "weight", None) is getattr(embed, "weight", None)
    if tied and method is not None:
        method.process_weights_after_loading(head)


class RolloutServer:
    """The engine and the request handlers (one engine per server process)."""

    def __init__(self) -> None:
        self.llm: Any = None

    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        op = msg.get("op")
        if op == "load":
            return self.load(msg)
        if op == "generate":
            return self.generate(msg)
        if op == "sync":
            return self.sync(msg)
        if op == "ping":
            return {"ok": True}
        raise ValueError(f"unknown request {op!r}; expected load, generate, sync, ping or close")

    def load(self, msg: dict[str, Any]) -> dict[str, Any]:
        import vllm
        from vllm import LLM

        install_loopback_store()  # the engine's torch.distributed store on 127.0.0.1 only (VLLM_HOST_IP)
        started = time.perf_counter()
        self.llm = LLM(model=msg["model"], dtype=msg.get("dtype", "auto"), seed=int(msg.get("seed", 0)),
                       skip_tokenizer_init=True, enable_prefix_caching=True, **dict(msg.get("engine") or {}))
        return {"ok": True, "load_s": time.perf_counter() - started, "vllm_version": vllm.__version__}

    def _engine(self) -> Any:
        if self.llm is None:
            raise RuntimeError("no engine yet: send a load request first")
        return self.llm

    def generate(self, msg: dict[str, Any]) -> dict[str, Any]:
        llm = self._engine()
        from vllm import SamplingParams
        from vllm.inputs import TokensPrompt

        prompts: list[list[int]] = msg["prompts"]
        params = dict(msg["params"])
        seeds: list[list[int | None]] = msg.get("seeds") or [[None] * int(msg["n"]) for _ in prompts]
        requests, sampling = [], []
        for ids, row_seeds in zip(prompts, seeds, strict=True):
            for seed in row_seeds:  # one request per sample, each with its own seed
                requests.append(TokensPrompt(prompt_token_ids=[int(t) for t in ids]))
                sampling.append(SamplingParams(**{**params, "seed": seed}))
        started = time.perf_counter()
        outputs = llm.generate(requests, sampling, use_tqdm=False)
        elapsed = time.perf_counter() - started
        completions: list[list[dict[str, Any]]] = []
        row = 0
        for row_seeds in seeds:
            group = []
            for _ in row_seeds:
                sample = outputs[row].outputs[0]
                group.append({"token_ids": [int(t) for t in sample.token_ids],
                              "logprobs": _sampled_logprobs(sample.token_ids, sample.logprobs),
                              "finish_reason": sample.finish_reason})
                row += 1
            completions.append(group)
        return {"ok": True, "completions": completions, "generate_s": elapsed}

    def sync(self, msg: dict[str, Any]) -> dict[str, Any]:
        llm = self._engine()
        from safetensors.torch import load_file

        started = time.perf_counter()
        items = list(load_file(msg["weights"]).items())
        loaded = time.perf_counter()
        llm.collective_rpc(_reload, args=(items,))
        llm.reset_prefix_cache()
        ended = time.perf_counter()
        return {"ok": True, "read_s": loaded - started, "engine_s": ended - loaded, "tensors": len(items)}


def _sampled_logprobs(token_ids: Any, logprobs: Any) -> list[float]:
    """The log-prob of each sampled token from vLLM's per-position {token id: Logprob} maps."""
    if logprobs is None:
        raise RuntimeError("vLLM returned no log-probs; the request must set logprobs=0")
    return [float(logprobs[pos][int(tok)].logprob) for pos, tok in enumerate(token_ids)]


def serve(requests: Any, replies: Any) -> None:
    """Answer requests until ``close`` or the end of the request stream."""
    server = RolloutServer()
    while True:
        try:
            msg = read_message(requests)
        except EOFError:
            return
        if msg.get("op") == "close":
            write_message(replies, {"ok": True})
            return
        try:
            reply = server.handle(msg)
        except Exception as exc:  # every failure goes back to the trainer, which raises it there
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
        write_message(replies, reply)


def main() -> None:
    replies = os.fdopen(os.dup(sys.stdout.fileno()), "wb")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # vLLM and its libraries print: keep them off the replies
    sys.stdout = sys.stderr
    serve(sys.stdin.buffer, replies)


if __name__ == "__main__":  # vLLM may spawn processes, which import this module again
    main()
