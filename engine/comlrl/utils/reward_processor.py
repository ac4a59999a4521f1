"""CoMLRL's ``comlrl.utils.reward_processor``: float -> float reward post-processors."""

from engine.rewards.team_reward import RewardProcessors

__all__ = ["RewardProcessors"]
