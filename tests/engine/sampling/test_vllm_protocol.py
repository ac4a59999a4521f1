"""The trainer/vLLM-server wire and the client's pure helpers: no vLLM needed, always run."""

from __future__ import annotations

import io
import sys

import pytest
import torch

from engine.sampling.vllm_backend import (
    VLLMBackendError,
    VLLMRollout,
    cpu_binding,
    resolve_vllm_python,
    server_environment,
    weight_tensors,
)
from engine.sampling.vllm_protocol import (
    HEADER,
    encode_message,
    read_message,
    sample_seeds,
    sampling_params,
    trim_completion,
    write_message,
)
from engine.sampling.vllm_server import serve


def test_messages_round_trip_in_order():
    stream = io.BytesIO()
    write_message(stream, {"op": "generate", "prompts": [[1, 2, 3]]})
    write_message(stream, {"ok": True, "logprobs": [-0.5, -1.25]})
    stream.seek(0)
    assert read_message(stream) == {"op": "generate", "prompts": [[1, 2, 3]]}
    assert read_message(stream) == {"ok": True, "logprobs": [-0.5, -1.25]}
    with pytest.raises(EOFError):
        read_message(stream)


def test_a_frame_is_an_8_byte_big_endian_length_then_json():
    assert encode_message({"a": 1}) == b"\x00\x00\x00\x00\x00\x00\x00\x07" + b'{"a":1}'


def test_a_cut_message_and_a_stray_print_are_errors():
    frame = encode_message({"op": "ping"})
    with pytest.raises(EOFError, match="ended"):
        read_message(io.BytesIO(frame[:-2]))
    with pytest.raises(ValueError, match="not plausible"):
        read_message(io.BytesIO(b"INFO 12-04 loading model\n" + frame))


def test_sampling_params_map_the_trainer_settings():
    p = sampling_params(max_new_tokens=48, temperature=0.6, top_p=0.9, top_k=50, greedy=False,
                        stop_token_ids=[2, 7], seed=11)
    assert (p["max_tokens"], p["temperature"], p["top_p"], p["top_k"], p["seed"]) == (48, 0.6, 0.9, 50, 11)
    assert p["stop_token_ids"] == [2, 7] and p["logprobs"] == 0 and p["n"] == 1 and p["detokenize"] is False
    assert sampling_params(max_new_tokens=4, temperature=0.6, top_p=0.9, top_k=None, greedy=False,
                           stop_token_ids=[2], seed=None)["top_k"] == -1  # None and 0 are "off"
    greedy = sampling_params(max_new_tokens=4, temperature=0.6, top_p=0.9, top_k=50, greedy=True,
                             stop_token_ids=[2], seed=5)
    assert (greedy["temperature"], greedy["top_p"], greedy["top_k"], greedy["seed"]) == (0.0, 1.0, -1, None)


def test_every_sample_gets_its_own_seed():
    assert sample_seeds(100, 2, 3) == [[100, 101, 102], [103, 104, 105]]
    assert sample_seeds(2**63 - 1, 1, 2) == [[2**63 - 1, 0]]


def test_a_completion_is_kept_up_to_and_including_its_first_eos():
    assert trim_completion([5, 6, 2, 9, 2], [-1.0, -2.0, -3.0, -4.0, -5.0], [2]) == ([5, 6, 2], [-1.0, -2.0, -3.0])
    assert trim_completion([5, 6], [-1.0, -2.0], [2]) == ([5, 6], [-1.0, -2.0])
    assert trim_completion([], [], [2]) == ([], [])


def test_cpu_binding_joins_ranges():
    assert cpu_binding({0, 1}) == "0-1"
    assert cpu_binding({0, 1, 2, 5, 7, 8}) == "0-2,5,7-8"
    assert cpu_binding({3}) == "3"


def test_the_server_environment_keeps_the_engine_in_process_and_pins_a_gpu():
    env = server_environment(torch.device("cuda:1"))
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and env["CUDA_VISIBLE_DEVICES"] == "1"
    assert "CUDA_VISIBLE_DEVICES" not in server_environment(torch.device("cpu"))


def test_weights_travel_once_under_their_checkpoint_names():
    model = torch.nn.Sequential(torch.nn.Embedding(4, 3), torch.nn.Linear(3, 4, bias=False))
    model[1].weight = model[0].weight  # tied, as a model with tie_word_embeddings
    tensors = weight_tensors(model)
    assert list(tensors) == ["0.weight"] and torch.equal(tensors["0.weight"], model[0].weight)


def test_the_server_loop_answers_errors_and_stops_on_close():
    requests = io.BytesIO(b"".join(encode_message(m) for m in (
        {"op": "ping"}, {"op": "generate", "prompts": [[1]], "params": {}}, {"op": "teleport"}, {"op": "close"},
        {"op": "ping"})))
    replies = io.BytesIO()
    serve(requests, replies)
    replies.seek(0)
    answers = []
    while True:
        try:
            answers.append(read_message(replies))
        except EOFError:
            break
    assert answers[0] == {"ok": True}
    assert not answers[1]["ok"] and "send a load request first" in answers[1]["error"]
    assert not answers[2]["ok"] and "unknown request 'teleport'" in answers[2]["error"]
    assert answers[3] == {"ok": True} and len(answers) == 4  # nothing answered after close
    assert HEADER.size == 8


def test_a_missing_vllm_venv_names_the_install_script(tmp_path):
    with pytest.raises(VLLMBackendError, match=r"scripts/install_vllm\.sh"):
        resolve_vllm_python(str(tmp_path / "no-venv" / "bin" / "python"))
    with pytest.raises(VLLMBackendError, match="vllm_python='.venv-none/bin/python'"):
        resolve_vllm_python(".venv-none/bin/python")


def test_choosing_vllm_without_its_venv_fails_at_setup_with_the_fix(llama):
    from engine import MAGRPOConfig
    from engine.trainer.setup import AgentSetup, load_agents

    model, tok = llama
    config = MAGRPOConfig(rollout_backend="vllm", vllm_python="/nonexistent/vllm-venv/bin/python", seed=0)  # as a trainer hands it
    with pytest.raises(VLLMBackendError, match=r"run scripts/install_vllm\.sh"):
        load_agents([AgentSetup(name="a", model=model, tokenizer=tok)], config)


def test_a_python_without_vllm_reports_the_servers_error(llama):
    """The real server process, started with the trainer's python (which has no vLLM): the load fails
    there and the client raises its error, naming the missing module."""
    model, tok = llama
    with pytest.raises(VLLMBackendError, match="could not start the engine: ModuleNotFoundError: No module named 'vllm'"):
        VLLMRollout(model, tok, python=sys.executable, device=torch.device("cpu"), seed=0)
