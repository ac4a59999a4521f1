"""The vLLM interpreter is an operator setting, never a run-config field, and the vLLM server process is
started with an environment of its own: its torch.distributed store on the loopback interface, and the
variables vLLM needs only in that child's environment, never in the trainer's. No vLLM needed: these
check the pure parts (the schema, the interpreter chosen, the child's environment) and the store on the
trainer's own torch."""

from __future__ import annotations

import json
import os
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from engine.permissions.operator import LIBRARY, OperatorPermissions
from engine.sampling.vllm_python import SETTING, VLLMBackendError, resolve_vllm_python
from engine.schema.run_config import ConfigError, parse_run_config


def script(tmp_path: Path) -> Path:
    path = tmp_path / "x.sh"
    path.write_text("#!/bin/sh\ntouch " + str(tmp_path / "ran") + "\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


@pytest.mark.parametrize("section", ["trainer", "system"])
def test_a_run_config_may_not_name_the_vllm_python(tmp_path, section):
    trainer = {"vllm_python": str(script(tmp_path)), "rollout_backend": "vllm"}
    data = {"agents": [{"name": "a"}, {"name": "b"}], "task": {"name": "quickstart"}}
    if section == "trainer":
        data["trainer"] = trainer
        where = "trainer.vllm_python"
    else:
        data["system"] = {"trainers": [{"name": "t", "agents": ["a", "b"], "trainer": trainer}]}
        where = "system.trainers.0.trainer.vllm_python"
    with pytest.raises(ConfigError) as caught:
        parse_run_config(data)
    line = next(li for li in str(caught.value).splitlines() if li.startswith(where))
    assert SETTING in line and "operator" in line, line
    assert not (tmp_path / "ran").exists()


def test_configs_stored_with_the_old_default_still_load():
    """Every run config stored before held ``vllm_python``'s default (a dump has every field): it is dropped."""
    data = {"agents": [{"name": "a"}, {"name": "b"}], "trainer": {"vllm_python": ".venv-vllm/bin/python"}}
    data["system"] = {"trainers": [{"name": "t", "agents": ["a", "b"],
                                    "trainer": {"vllm_python": ".venv-vllm/bin/python"}}]}
    config = parse_run_config(data)
    assert "vllm_python" not in config.trainer.model_dump()


def test_the_operator_setting_wins_over_a_config_and_library_use_keeps_its_own(tmp_path):
    from engine import MAGRPOConfig

    assert LIBRARY.vllm_python is None
    assert LIBRARY.chosen_vllm_python("/library/python") == "/library/python"  # no operator settings: as given
    assert LIBRARY.configure(MAGRPOConfig(vllm_python="/library/python")).vllm_python == "/library/python"
    operator = OperatorPermissions(vllm_python="/opt/vllm/bin/python")
    assert operator.chosen_vllm_python("/tmp/x.sh") == "/opt/vllm/bin/python"
    cfg = operator.configure(MAGRPOConfig(vllm_python="/tmp/x.sh"))  # what the run-config build does
    assert cfg.vllm_python == "/opt/vllm/bin/python"
    with pytest.raises(VLLMBackendError, match=f"{SETTING}='/opt/vllm/bin/python'"):
        resolve_vllm_python(cfg.vllm_python)


def test_a_missing_interpreter_names_the_config_field_in_library_use(tmp_path):
    with pytest.raises(VLLMBackendError, match="vllm_python='/nowhere/python'"):
        resolve_vllm_python("/nowhere/python")


def test_the_servers_environment_is_the_childs_alone():
    from engine.sampling.vllm_backend import LOOPBACK_HOST, server_command, server_environment

    before = dict(os.environ)
    env = server_environment(torch.device("cpu"))
    command = server_command("/opt/vllm/bin/python", torch.device("cpu"))
    assert dict(os.environ) == before  # nothing set for the trainer's own process
    assert command[0] == "env" and command[-3:] == ["/opt/vllm/bin/python", "-m", "engine.sampling.vllm_server"]
    assert command[1:-3] == [f"{k}={v}" for k, v in env.items()]  # added to what the child inherits, for it alone
    assert env["VLLM_ENABLE_V1_MULTIPROCESSING"] == "0" and env["VLLM_ALLOW_INSECURE_SERIALIZATION"] == "1"
    assert env["VLLM_HOST_IP"] == LOOPBACK_HOST == "127.0.0.1"  # the address vLLM hands torch.distributed
    assert env["GLOO_SOCKET_IFNAME"] == "lo" and env["NCCL_SOCKET_IFNAME"] == "lo"
    assert server_environment(torch.device("cuda", 1))["CUDA_VISIBLE_DEVICES"] == "1"


def test_the_child_gets_the_variables_and_the_trainer_keeps_its_own(tmp_path):
    """The command run for real with this python standing in for vLLM's: the child sees the variables,
    this process does not."""
    from engine.sampling.vllm_backend import server_command

    command = server_command(sys.executable, torch.device("cpu"))[:-2]
    code = "import json, os; print(json.dumps({k: os.environ.get(k) for k in ('VLLM_HOST_IP', 'PATH')}))"
    seen = json.loads(subprocess.run([*command, "-c", code], capture_output=True, text=True, check=True).stdout)
    assert seen == {"VLLM_HOST_IP": "127.0.0.1", "PATH": os.environ.get("PATH")}
    assert "VLLM_HOST_IP" not in os.environ and "VLLM_ALLOW_INSECURE_SERIALIZATION" not in os.environ


def _listening(port: int) -> list[str]:
    found = []
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(name):
            continue
        for line in Path(name).read_text().splitlines()[1:]:
            local, state = line.split()[1], line.split()[3]
            if state == "0A" and local.endswith(f":{port:04X}"):
                found.append(local.split(":")[0])
    return found


@pytest.mark.skipif(not os.path.exists("/proc/net/tcp"), reason="no /proc/net/tcp to read listening sockets from")
def test_the_servers_store_listens_on_loopback_only(monkeypatch):
    """What vLLM asks of torch in the server process (a ``tcp://<VLLM_HOST_IP>:<port>`` rendezvous, rank 0 of
    one), here with the trainer's torch: torch's own store listens on every address; with the server's
    store installed it listens on 127.0.0.1 alone."""
    import importlib

    from engine.sampling.loopback_store import install_loopback_store

    rdzv = importlib.import_module("torch.distributed.rendezvous")
    monkeypatch.setitem(rdzv._rendezvous_handlers, "tcp", rdzv._rendezvous_handlers["tcp"])  # restored after

    def listening_after_rendezvous() -> list[str]:
        probe = socket.socket()
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        probe.close()
        store, _, _ = next(rdzv.rendezvous(f"tcp://127.0.0.1:{port}", rank=0, world_size=1))
        try:
            store.set("k", "v")
            return _listening(port)
        finally:
            del store

    assert listening_after_rendezvous() not in ([], ["0100007F"])  # torch's own: every address (:: or 0.0.0.0)
    assert install_loopback_store() and install_loopback_store()  # installing twice keeps one wrapper
    assert listening_after_rendezvous() == ["0100007F"]  # 127.0.0.1 only
