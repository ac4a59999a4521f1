"""The team reward: CoMLRL-style reward functions called once per joint action, and the named reward
terms tasks combine."""
