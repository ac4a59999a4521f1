"""A worker that owns several GPUs (``cooplab worker --device cuda:0,1,2,3``): its queue is the GPU set,
its jobs see the set, an fsdp run of N ranks is accepted on a queue of at least N GPUs and refused
elsewhere naming the fix, the memory check counts one rank per GPU when ``fsdp_ranks`` is empty, and
the ranks a job launches see the first N of its GPUs (rank ``LOCAL_RANK`` on GPU ``LOCAL_RANK``).
Pure: no GPU, no worker process (the worker's two gloo ranks are launched in test_jobs_fsdp.py)."""

from __future__ import annotations

import pytest

from engine.schema.run_config import parse_run_config
from jobs.celery_app import EXCHANGE, create_app, device_queue
from jobs.devices import device_gpus, job_device, rank_gpus, validate_device
from jobs.fsdp_job import rank_gpu_env, too_many_ranks
from jobs.preflight import run_config_problems, run_limits
from jobs.settings import Settings
from jobs.worker import node_name, pin_device
from tests.jobs.helpers import qwen2_1_5b_folder, tiny_config


def test_a_gpu_set_is_one_queue_with_a_canonical_name():
    assert validate_device("cuda:0,1,2,3") == "cuda:0,1,2,3"
    assert device_gpus("cuda:4,5,6,7") == (4, 5, 6, 7) and device_gpus("cuda:3") == (3,) and device_gpus("cpu") == ()
    for bad in ("cuda:1,0", "cuda:0,0"):  # the same GPUs named another way would be another queue
        with pytest.raises(ValueError, match="ascending order"):
            validate_device(bad)
    for bad in ("cuda:0,", "cuda:,1", "cuda:0, 1", "cuda:0-3", "cpu,cuda:0", "cuda:" + ",".join(map(str, range(40)))):
        with pytest.raises(ValueError, match=r"cuda:N,M"):
            validate_device(bad)
    queue = device_queue("cuda:0,1,2,3")
    assert (queue.name, queue.routing_key) == ("cuda:0,1,2,3", "cuda:0,1,2,3")
    assert node_name("cuda:0,1,2,3", host="h", pid=42) == "cooplab-cuda0_1_2_3-42@h"
    env: dict[str, str] = {}
    pin_device("cuda:4,5,6,7", env)
    assert env["CUDA_VISIBLE_DEVICES"] == "4,5,6,7"
    assert job_device("cuda:4,5,6,7") == "cuda:0" and job_device("cpu") == "cpu"


def test_a_gpu_sets_queue_carries_its_messages_through_the_filesystem_broker(tmp_path):
    """The real broker (kombu's filesystem transport, as the workers use it): a message routed to the set's
    queue is a file named by the set, which the set's queue gives and a single GPU's queue does not."""
    app = create_app(Settings(home=tmp_path), devices=("cuda:0,1", "cuda:0"))
    with app.connection_for_write() as connection:
        channel = connection.default_channel
        for device in ("cuda:0,1", "cuda:0"):
            device_queue(device)(channel).declare()
        connection.Producer(channel).publish({"run": 7}, exchange=EXCHANGE, routing_key="cuda:0,1")
        assert [p.name.split(".", 1)[1] for p in (tmp_path / "broker" / "in").iterdir()] == ["cuda:0,1.msg"]
        assert channel.basic_get("cuda:0", no_ack=True) is None
        assert channel.basic_get("cuda:0,1", no_ack=True).payload == {"run": 7}


def _fsdp(ranks: int | None, model: str | None = None) -> dict:
    config = tiny_config(max_steps=2, num_turns=1, parallel_training="fsdp", fsdp_ranks=ranks)
    if model is not None:
        config["agents"][0]["model"] = model
    return config


def _problems(config: dict, settings: Settings, device: str) -> dict[str, str]:
    """Pre-flight's problems by field (each field here has one)."""
    return {p.field: p.message for p in run_config_problems(parse_run_config(config), settings=settings, device=device)}


def test_an_fsdp_run_goes_to_a_queue_with_a_gpu_per_rank_or_is_refused_naming_the_fix(tmp_path):
    settings = Settings(home=tmp_path, require_cached_models=False)
    assert run_limits(settings, "cuda:0,1,2,3").cuda_devices == 4
    assert "trainer.fsdp_ranks" not in _problems(_fsdp(4), settings, "cuda:0,1,2,3")
    assert "trainer.fsdp_ranks" not in _problems(_fsdp(2), settings, "cuda:4,5,6,7")  # 2 of the set's 4
    assert "trainer.fsdp_ranks" not in _problems(_fsdp(4), settings, "cpu")  # gloo ranks on the CPU: any number
    assert "trainer.fsdp_ranks" not in _problems(_fsdp(None), settings, "cuda:0")  # one rank per GPU: 1
    refusal = _problems(_fsdp(4), settings, "cuda:0,1")["trainer.fsdp_ranks"]
    assert refusal.startswith("4 ranks, one GPU each, but a job on the cuda:0,1 queue") and "has 2 GPUs" in refusal
    assert "cooplab worker --device cuda:0,1,2,3" in refusal and "fsdp_ranks to at most 2" in refusal
    assert "has 1 GPU;" in _problems(_fsdp(2), settings, "cuda:3")["trainer.fsdp_ranks"]
    # the job's own check, for a run stored before its queue was known
    assert too_many_ranks(4, 2).startswith("trainer.fsdp_ranks: 4 ranks, one GPU each, but this job sees 2 GPU(s)")
    assert "cooplab worker --device cuda:0,1,2,3" in too_many_ranks(4, 2)


def test_the_memory_check_counts_one_rank_per_gpu_of_the_queue(tmp_path):
    folder = qwen2_1_5b_folder(tmp_path)  # Qwen2.5-1.5B's shape: 1,543,714,304 parameters
    # per rank, bfloat16 compute: states 16 P / W; gathered = root 233,375,232 x (2 + 4) + two layers
    # 2 x 46,797,824 x 2 + one layer's fp32 gradients 46,797,824 x 4 = 1,400,251,392 + 374,382,592
    gathered = 233_375_232 * 6 + 46_797_824 * 8
    one, two = 16 * 1_543_714_304 + gathered, 16 * 771_857_152 + gathered  # 24.7 GB and 14.1 GB
    settings = Settings(home=tmp_path / "home", device_memory_gib=16, require_cached_models=False,
                        data_roots=str(tmp_path))
    config = _fsdp(None, str(folder))
    config["trainer"]["torch_dtype"] = "bfloat16"
    refusal = _problems(config, settings, "cuda:0")["agents.0.model"]  # empty fsdp_ranks on one GPU: 1 rank
    assert f"needs at least {one:,} bytes" in refusal and "on 1 rank " in refusal
    assert "fsdp_ranks: 2 on a worker that owns 2 GPUs (cooplab worker --device cuda:0,1)" in refusal
    assert "agents.0.model" not in _problems(config, settings, "cuda:0,1")  # 2 ranks: 14.1 GB of 17.2 GB
    assert two < 16 * 1024**3 < one
    config["trainer"]["fsdp_ranks"] = 1  # named: one rank, whatever the queue has
    assert f"{one:,} bytes" in _problems(config, settings, "cuda:0,1")["agents.0.model"]


def test_the_ranks_see_the_first_of_their_jobs_gpus():
    gpu = parse_run_config({**_fsdp(2), "trainer": {**_fsdp(2)["trainer"], "device": "cuda:0"}})
    cpu = parse_run_config(_fsdp(2))
    assert rank_gpu_env(gpu, 2, {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}) == {"CUDA_VISIBLE_DEVICES": "4,5"}
    assert rank_gpu_env(gpu, 4, {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}) == {"CUDA_VISIBLE_DEVICES": "4,5,6,7"}
    assert rank_gpu_env(gpu, 2, {}) == {}  # no worker pinned the GPUs: every visible one is the job's
    assert rank_gpu_env(cpu, 2, {"CUDA_VISIBLE_DEVICES": ""}) == {}  # gloo ranks on the CPU
    assert rank_gpus("GPU-a, GPU-b", 1) == "GPU-a"
    with pytest.raises(ValueError, match="3 ranks, but this job sees 2 GPU"):
        rank_gpus("0,1", 3)
