"""Preference trainers: MADPO (team-reward-labelled preference pairs, a DPO loss factorised over
agents), with CoMLRL's config names and defaults.

``engine.schema.preference_configs`` is torch-free (the dashboard form reads it); the trainer is in
``engine.preference.madpo``. ``from engine import MADPOConfig, MADPOTrainer`` works as in CoMLRL.
"""
