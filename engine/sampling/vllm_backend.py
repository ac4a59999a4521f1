"""The vLLM rollout backend (``rollout_backend: vllm``): an agent samples through a vLLM engine that
runs in a process of its own.

vLLM pins a ``transformers`` older than the project's, so it is installed into a venv of its own by
``scripts/install_vllm.sh`` and the operator's ``COOPLAB_VLLM_PYTHON`` names that venv's python. A
:class:`VLLMRollout` serves one model object (agents that share a model share it):

- At start it saves the model's current weights and config to a private folder and starts
  :mod:`engine.sampling.vllm_server` with the vLLM python, which loads an engine on that folder in
  the model's dtype. The tokenizer stays here: prompts go to the engine as token ids and the
  completions come back as token ids.
- :meth:`VLLMRollout.generate` returns a :class:`engine.sampling.sampler.Generation`, as the lean
  decoder does: completion ids up to and including the first EOS and each sampled token's log-prob
  under the unmodified policy, so the update needs no re-encode. Each sample has its own seed, drawn
  from the agent's generator, so runs repeat.
- Before a sampling call that follows an optimizer step (or any in-place change to a weight, such as
  a checkpoint restore), every parameter is written to a safetensors file and the engine reloads
  them (:meth:`VLLMRollout.sync`); the seconds it took are kept for ``perf/weight_sync_s``. After a
  sync the engine's greedy tokens equal the trainer's.

The server's environment (:func:`server_command`: the trainer's own, inherited, plus these, added by
``env`` for that child alone: the trainer's environment is neither read nor changed) gets
``VLLM_ENABLE_V1_MULTIPROCESSING=0`` (the engine in the server process, so a sync hands it the
tensors without another copy),
``VLLM_ALLOW_INSECURE_SERIALIZATION=1`` (the sync passes a function to the engine's workers),
``VLLM_CPU_KVCACHE_SPACE`` (GB of KV cache on a CPU), ``VLLM_CPU_OMP_THREADS_BIND`` (this process's
cores), ``VLLM_HOST_IP=127.0.0.1`` with ``GLOO_SOCKET_IFNAME``/``NCCL_SOCKET_IFNAME=lo`` (the engine's
torch.distributed group on the loopback interface; the server binds its store there too,
:mod:`engine.sampling.loopback_store`) and, for an agent on ``cuda:i``, ``CUDA_VISIBLE_DEVICES=i``.

Which python runs the server is the config's ``vllm_python``: a run built under operator settings holds
the operator's ``COOPLAB_VLLM_PYTHON`` there whatever its run config said, a library config its own
(:mod:`engine.sampling.vllm_python`).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import threading
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from engine.sampling.loopback_store import LOOPBACK_HOST
from engine.sampling.sampler import (
    Generation,
    _derive_seed,
    _tokenize,
    decode_completions,
    eos_token_ids,
    left_pad,
)
from engine.sampling.vllm_protocol import (
    read_message,
    sample_seeds,
    sampling_params,
    trim_completion,
    write_message,
)
from engine.sampling.vllm_python import (  # noqa: F401 (re-exported)
    INSTALL_HINT,
    ROOT,
    VLLMBackendError,
    resolve_vllm_python,
)

if TYPE_CHECKING:
    from transformers import PreTrainedModel

KV_CACHE_GB = 1  # the KV cache of a CPU engine, in GB
GPU_MEMORY_FRACTION = 0.3  # of a GPU the trainer shares with its engine
_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


def cpu_binding(cores: set[int] | None = None) -> str:
    """``VLLM_CPU_OMP_THREADS_BIND`` for a set of cores: ranges joined by commas ("0-3,6")."""
    ordered = sorted(cores if cores is not None else os.sched_getaffinity(0))
    spans: list[str] = []
    start = prev = ordered[0]
    for core in [*ordered[1:], None]:
        if core is not None and core == prev + 1:
            prev = core
            continue
        spans.append(f"{start}-{prev}" if prev > start else f"{start}")
        if core is not None:
            start = prev = core
    return ",".join(spans)


def server_environment(device: torch.device) -> dict[str, str]:
    """The variables the server process gets on top of the trainer's environment."""
    cores = os.sched_getaffinity(0)
    env = {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_ALLOW_INSECURE_SERIALIZATION": "1",
           "VLLM_CPU_KVCACHE_SPACE": str(KV_CACHE_GB), "VLLM_CPU_OMP_THREADS_BIND": cpu_binding(cores),
           "OMP_NUM_THREADS": str(len(cores)), "TOKENIZERS_PARALLELISM": "false",
           # the engine's torch.distributed group and its store on the loopback interface only
           "VLLM_HOST_IP": LOOPBACK_HOST, "GLOO_SOCKET_IFNAME": "lo", "NCCL_SOCKET_IFNAME": "lo"}
    if device.type == "cuda":
        env["CUDA_VISIBLE_DEVICES"] = str(device.index or 0)
    return env


def server_command(python: Path | str, device: torch.device) -> list[str]:
    """The server's command line: ``env`` adds :func:`server_environment` to the environment the child
    inherits and then becomes the server, so the variables are that child's alone (this process's
    environment is neither read nor changed)."""
    pairs = [f"{name}={value}" for name, value in server_environment(device).items()]
    return ["env", *pairs, str(python), "-m", "engine.sampling.vllm_server"]


def engine_arguments(device: torch.device, *, eager: bool = True) -> dict[str, Any]:
    """Keyword arguments for ``vllm.LLM`` beyond the model, dtype and seed. ``eager`` skips vLLM's
    torch.compile and graph capture (a start in seconds instead of minutes on a small CPU)."""
    args: dict[str, Any] = {"enforce_eager": eager}
    if device.type == "cuda":
        args["gpu_memory_utilization"] = GPU_MEMORY_FRACTION
    return args


def weight_tensors(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The parameters under their checkpoint names, each once (a tied weight under its first name),
    contiguous and on the CPU, as safetensors writes them."""
    return {name: param.detach().contiguous().cpu() for name, param in model.named_parameters()}


class VLLMRollout:
    """One vLLM engine serving one model object; see the module docstring."""

    def __init__(self, model: PreTrainedModel, tokenizer: Any, *, python: Path, device: torch.device,
                 seed: int) -> None:
        self.source = model
        self.tokenizer = tokenizer
        self.python = python
        self.device = device
        dtype = next(model.parameters()).dtype
        if dtype not in _DTYPES:
            raise VLLMBackendError(f"rollout_backend: vllm serves float32, bfloat16 or float16 models; this one is {dtype}")
        self.dtype = _DTYPES[dtype]
        self.eos_ids = eos_token_ids(model, tokenizer)
        pad = tokenizer.pad_token_id
        self.pad_id = int(pad if pad is not None else self.eos_ids[0])
        self.sync_seconds = 0.0  # since the last take_sync_seconds()
        self.syncs = 0
        self.load_seconds = 0.0
        self._stepped = False
        self._lock = threading.RLock()  # agents sharing the engine may sample from threads: one request at a time
        self._params = list(model.parameters())
        self._versions = [p._version for p in self._params]
        self.workdir = Path(tempfile.mkdtemp(prefix="cooplab-vllm-", dir=_fast_temp_root()))
        self._process: subprocess.Popen[bytes] | None = None
        self._log_path = self.workdir / "server.log"
        self._finalizer = weakref.finalize(self, _shutdown, None, self.workdir)
        self._start(seed)

    # -- lifecycle --------------------------------------------------------------------------------
    def _start(self, seed: int) -> None:
        model_dir = self.workdir / "model"
        self.source.save_pretrained(model_dir, safe_serialization=True)
        log = open(self._log_path, "wb")  # noqa: SIM115 - the server writes it for its whole life
        try:
            self._process = subprocess.Popen(server_command(self.python, self.device), cwd=ROOT, stdin=subprocess.PIPE,
                                             stdout=subprocess.PIPE, stderr=log)
        finally:
            log.close()
        self._finalizer.detach()
        self._finalizer = weakref.finalize(self, _shutdown, self._process, self.workdir)
        started = time.perf_counter()
        self._request({"op": "load", "model": str(model_dir), "dtype": self.dtype, "seed": int(seed),
                       "engine": engine_arguments(self.device)}, what="start the engine")
        self.load_seconds = time.perf_counter() - started
        for weights in model_dir.glob("*.safetensors"):  # loaded: free their memory (/dev/shm) for the engine's life
            weights.unlink()

    def close(self) -> None:
        """Stop the server and remove its folder (also done when the object is collected or at exit)."""
        self._finalizer()

    def serves(self, model: Any) -> bool:
        return model is self.source

    def watch(self, optimizer: torch.optim.Optimizer) -> None:
        """Sync the weights before the next sampling call whenever ``optimizer`` steps."""
        optimizer.register_step_post_hook(self._after_step)

    def _after_step(self, *_: Any) -> None:
        self._stepped = True

    def _request(self, msg: dict[str, Any], *, what: str) -> dict[str, Any]:
        proc = self._process
        if proc is None or proc.poll() is not None:
            raise VLLMBackendError(f"the vLLM rollout server is not running; could not {what}.{self._log_tail()}")
        try:
            with self._lock:
                assert proc.stdin is not None and proc.stdout is not None  # the server is started with pipes
                write_message(proc.stdin, msg)
                reply = read_message(proc.stdout)
        except (BrokenPipeError, EOFError, OSError) as exc:
            raise VLLMBackendError(f"the vLLM rollout server stopped while asked to {what} ({exc}).{self._log_tail()}") \
                from None
        if not reply.get("ok"):
            raise VLLMBackendError(f"the vLLM rollout server could not {what}: {reply.get('error')}\n"
                                   f"{reply.get('traceback', '')}")
        return reply

    def _log_tail(self, lines: int = 30) -> str:
        try:
            text = self._log_path.read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            return ""
        return "\nLast lines of its log:\n" + "\n".join(text[-lines:]) if text else ""

    # -- weights ----------------------------------------------------------------------------------
    def stale(self) -> bool:
        """An optimizer stepped, or a weight was written in place, since the last sync."""
        return self._stepped or any(p._version != v for p, v in zip(self._params, self._versions, strict=True))

    def sync(self) -> float:
        """Push every parameter to the engine; returns the seconds it took (also added to
        :attr:`sync_seconds`)."""
        from safetensors.torch import save_file

        with self._lock:
            started = time.perf_counter()
            path = self.workdir / "weights.safetensors"
            with torch.no_grad():
                save_file(weight_tensors(self.source), str(path))
            self._request({"op": "sync", "weights": str(path)}, what="reload the weights")
            path.unlink(missing_ok=True)
            self._stepped = False
            self._versions = [p._version for p in self._params]
            elapsed = time.perf_counter() - started
        self.sync_seconds += elapsed
        self.syncs += 1
        return elapsed

    def take_sync_seconds(self) -> float:
        """Seconds spent syncing since the last call (for ``perf/weight_sync_s``)."""
        seconds, self.sync_seconds = self.sync_seconds, 0.0
        return seconds

    # -- sampling ---------------------------------------------------------------------------------
    def generate(self, prompts: list[str] | list[list[int]], *, num_generations: int, max_new_tokens: int,
                 temperature: float, top_p: float, top_k: int | None, do_sample: bool = True,
                 generator: torch.Generator | None = None, add_special_tokens: bool = True) -> Generation:
        """K completions per prompt from the engine, as the lean decoder returns them."""
        with self._lock:
            if self.stale():
                self.sync()
        ids = _tokenize(self.tokenizer, prompts, add_special_tokens)
        prompt_ids, prompt_mask = left_pad(ids, self.pad_id)
        per_prompt = num_generations if do_sample else 1  # greedy: one decode, repeated K times
        base = _derive_seed(generator) if generator is not None and do_sample else None
        seeds = sample_seeds(base, len(ids), per_prompt) if base is not None else [[None] * per_prompt for _ in ids]
        params = sampling_params(max_new_tokens=max_new_tokens, temperature=temperature, top_p=top_p, top_k=top_k,
                                 greedy=not do_sample, stop_token_ids=self.eos_ids, seed=None)
        reply = self._request({"op": "generate", "prompts": ids, "params": params, "seeds": seeds}, what="sample")
        rows: list[tuple[list[int], list[float]]] = []
        for group in reply["completions"]:
            trimmed = [trim_completion(c["token_ids"], c["logprobs"], self.eos_ids) for c in group]
            rows.extend(trimmed * (num_generations // per_prompt))
        return self._generation(prompt_ids, prompt_mask, rows, num_generations)

    def _generation(self, prompt_ids: torch.Tensor, prompt_mask: torch.Tensor,
                    rows: list[tuple[list[int], list[float]]], num_generations: int) -> Generation:
        width = max(1, max(len(tokens) for tokens, _ in rows))
        completion = torch.full((len(rows), width), self.pad_id, dtype=torch.long)
        mask = torch.zeros((len(rows), width), dtype=torch.long)
        logps = torch.zeros((len(rows), width), dtype=torch.float32)
        for r, (tokens, lps) in enumerate(rows):
            if tokens:
                completion[r, :len(tokens)] = torch.tensor(tokens, dtype=torch.long)
                mask[r, :len(tokens)] = 1
                logps[r, :len(tokens)] = torch.tensor(lps, dtype=torch.float32)
        decoded = decode_completions(self.tokenizer, [tokens for tokens, _ in rows])
        texts = [decoded[p * num_generations:(p + 1) * num_generations] for p in range(prompt_ids.shape[0])]
        return Generation(prompt_ids=prompt_ids, prompt_mask=prompt_mask, completion_ids=completion,
                          completion_mask=mask, texts=texts, num_tokens=int(mask.sum()),
                          num_generations=num_generations, token_logprobs=logps)


def _fast_temp_root() -> str | None:
    """Memory-backed /dev/shm where there is one (the weights pass through it at every sync)."""
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() and os.access(shm, os.W_OK) else None


def _shutdown(process: subprocess.Popen[bytes] | None, workdir: Path) -> None:
    if process is not None and process.poll() is None:
        try:
            assert process.stdin is not None  # the server is started with pipes
            write_message(process.stdin, {"op": "close"})
            process.wait(timeout=30)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            process.kill()  # the server this object started, by its own handle
            process.wait()
    for stream in (process.stdin, process.stdout) if process is not None else ():
        if stream is not None:
            stream.close()
    shutil.rmtree(workdir, ignore_errors=True)


def rollout_engine_for(model: PreTrainedModel, tokenizer: Any, *, python_setting: str, device: torch.device,
                       seed: int, engines: dict[int, VLLMRollout]) -> VLLMRollout:
    """The engine serving ``model`` (one per model object, kept in ``engines``), started on first use."""
    from engine.lora.adapters import is_lora

    if is_lora(model):
        raise VLLMBackendError("rollout_backend: vllm serves full models; LoRA agents are not supported yet. "
                               "Use rollout_backend: hf for LoRA agents")
    if id(model) not in engines:
        python = resolve_vllm_python(python_setting)  # the operator's, where the build applied one
        engines[id(model)] = VLLMRollout(model, tokenizer, python=python, device=device, seed=seed)
    return engines[id(model)]
