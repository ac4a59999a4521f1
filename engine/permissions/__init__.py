"""What a run config may do: outbound hosts, write paths, remote code, run permissions and the text
scrubbing applied to what a policy writes for a judge. Torch-free."""
