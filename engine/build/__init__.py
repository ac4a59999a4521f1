"""From a run config to a team and its trainer: configuration, models and the run folder."""
