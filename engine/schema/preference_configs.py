"""``MADPOConfig`` and ``CentralizedMAGRPOConfig``: CoMLRL 1.4.3's field names and defaults, plus
CoopLab's extras.

The settings come from :mod:`engine.schema.catalog`. CoMLRL's ``MADPOConfig`` extends its
``MAGRPOConfig``, so a CoMLRL script may pass any MAGRPO field; every one is accepted here. The
MAGRPO-only ones MADPO never reads (``num_generations``, ``discount``, advantage and reference-KL
settings) are the catalog's ``compat_only`` for madpo (a class's ``compat_only``): they are accepted
for ports, and the run config refuses them for ``madpo``.

Departures from CoMLRL, each deliberate (see docs/preference.md):

* ``reference_free`` defaults to False: the margin is anchored on the frozen initial policy
  (standard DPO). CoMLRL has only the reference-free form (``reference_free=True``), which weighs a
  pair by how much the initial policy already prefers its winner; with summed log-probs short winners
  start saturated and teach almost nothing (issue 39, docs/preference.md).
* ``joint_mode="cross"`` pairs joint candidates of the K^N product (CoMLRL refuses it).
* ``seed`` seeds the pair order and random pair selection (CoMLRL shuffles with the global RNG).
"""

from __future__ import annotations

from engine.schema.catalog import ACTOR_CRITIC, ALGORITHM_BASELINES, CATALOG
from engine.schema.configs import MAGRPOConfig
from engine.schema.derive import ConfigModel, config_class, run_config_settings

MADPO_DEFAULTS = {"num_turns": 1, "early_termination_threshold": None}
# the DPO trainers' own defaults: CoMLRL clips no gradient (measured: clipping at 1.0 cost about a fifth of
# the learning on the issue-25 workload, docs/preference.md); MARLHF's RL stage keeps the MAGRPO defaults
DPO_DEFAULTS = {**MADPO_DEFAULTS, "max_grad_norm": None}


def _pair_problems(config: ConfigModel, trainer: str, iterative_config: str, what: str) -> None:
    """The rules every preference config shares: single-turn, comparator pairs only when iterative,
    and a centralized team's comparator writes joint answers already."""
    if (config.iterative and config.collaboration_mode == "centralized"
            and config.comparator_generation_mode == "centralized"):
        raise ValueError("comparator_generation_mode: with collaboration_mode='centralized' the team is one model "
                         "writing every role, and so is its comparator; leave it 'decentralized'")
    if config.num_turns != 1:
        raise ValueError(f"num_turns: {trainer} is single-turn ({what}); set 1")
    if config.train_batch_size is None:  # CoMLRL resolves it when the config is made: MADPOConfig().train_batch_size == 2
        object.__setattr__(config, "train_batch_size", config.rollout_buffer_size)
    if config.pair_selection == "comparator_reward" and not config.iterative:
        raise ValueError(f"pair_selection: 'comparator_reward' compares with a comparator policy ({iterative_config}); "
                         f"use reward_gap, all or random")


class _Preference(ConfigModel):
    iterative: bool = False

    def __post_init__(self) -> None:
        _pair_problems(self, "MADPOIter" if self.iterative else "MADPO", "MADPOIterConfig",
                       "pairs compare whole joint answers")
        super().__post_init__()


MADPOConfig = config_class(
    "MADPOConfig", "madpo", module=__name__, defaults=DPO_DEFAULTS, bases=(_Preference,),
    doc="Settings of a :class:`engine.preference.MADPOTrainer` run (CoMLRL 1.4.3's ``MADPOConfig`` names and "
        "defaults first). ``train_batch_size`` pairs make one optimizer step (empty = ``rollout_buffer_size``, "
        "resolved when the config is made, as CoMLRL does); no gradient clipping unless ``max_grad_norm`` is set.",
)


class _Iterative(_Preference):
    iterative = True

    def __post_init__(self) -> None:
        if self.preference_pairs_per_sample is None:
            raise ValueError("preference_pairs_per_sample: the iterative trainers need a number (it fixes the steps "
                             "of an iteration)")
        super().__post_init__()


MADPOIterConfig = config_class(
    "MADPOIterConfig", "madpo_iter", module=__name__,
    defaults={**DPO_DEFAULTS, "num_train_epochs": 1, "preference_num_candidates": 20,
              "preference_pairs_per_sample": 4, "pair_selection": "comparator_reward"},
    bases=(_Iterative, MADPOConfig),
    doc="Settings of a :class:`engine.preference.madpo_iter.MADPOIterTrainer` run (CoMLRL 1.4.3's "
        "``MADPOIterConfig`` names and defaults): ``num_iterations`` rounds of collect-then-train, candidates "
        "compared with ``comparator_policy``'s.",
)


class _Centralized(ConfigModel):
    def __post_init__(self) -> None:
        if self.collaboration_mode != "centralized":
            raise ValueError("collaboration_mode: CentralizedMAGRPOConfig is the centralized baseline; use "
                             "MAGRPOConfig for a team of decentralized agents")
        if self.num_turns != 1:
            raise ValueError("num_turns: centralized MAGRPO is single-turn (one completion holds every role); set 1")
        super().__post_init__()


CentralizedMAGRPOConfig = config_class(
    "CentralizedMAGRPOConfig", "centralized_magrpo", module=__name__,
    defaults={"num_turns": 1, "collaboration_mode": "centralized"}, bases=(_Centralized, MAGRPOConfig),
    doc="Settings of a :class:`engine.preference.centralized_magrpo.CentralizedMAGRPOTrainer` run: "
        "``MAGRPOConfig`` plus ``collaboration_mode='centralized'`` (CoMLRL 1.4.3's ``CentralizedMAGRPOConfig``).",
)

# The critics' settings (the run config's trainer.actor_critic section): marlhf reads them with an iac/maac
# stage; those maac does not read belong to iac's per-agent critics.
CRITIC_SETTINGS = run_config_settings("actor_critic")
IAC_ONLY_CRITIC_SETTINGS = tuple(name for name in CRITIC_SETTINGS
                                 if "iac" in CATALOG[name].reads and "maac" not in CATALOG[name].reads)

MARLHF_CRITIC_DEFAULTS = {"critic_learning_rate": None, "value_clip_range": 0.2}  # CoMLRL's MARLHFConfig


class _LearnedReward(ConfigModel):
    iterative: bool = False

    def __post_init__(self) -> None:
        trainer = "MARLHFIter" if self.iterative else "MARLHF"
        _pair_problems(self, trainer, "MARLHFIterConfig", "the reward model scores whole joint answers")
        actor_critic = self.rl_algorithm in ACTOR_CRITIC
        if actor_critic and self.collaboration_mode == "centralized":
            raise ValueError(f"collaboration_mode: a centralized {trainer} runs a MAGRPO-family RL stage (one joint "
                             f"model, no critics); set rl_algorithm to magrpo, mareinforce, maremax or marloo")
        if actor_critic and self.iterative:
            raise ValueError("rl_algorithm: MARLHFIter runs a MAGRPO-family RL stage; iac/maac are MARLHF's (one "
                             "round of pairs); set rl_algorithm to magrpo, mareinforce, maremax or marloo")
        if self.rl_algorithm == "maac":  # one centralised critic: IAC's per-agent critic options do not apply
            for name in IAC_ONLY_CRITIC_SETTINGS:
                default = CATALOG[name].default
                if getattr(self, name) != default:
                    raise ValueError(f"{name}: only rl_algorithm iac reads it (maac has one centralised critic); "
                                     f"leave it at its default ({default!r})")
        if not actor_critic:
            for name in CRITIC_SETTINGS:
                default = MARLHF_CRITIC_DEFAULTS.get(name, CATALOG[name].default)
                if getattr(self, name) != default:
                    raise ValueError(f"{name}: only rl_algorithm iac/maac has critics (this config has "
                                     f"{self.rl_algorithm!r}); leave it at its default ({default!r})")
        super().__post_init__()
        if not actor_critic:
            object.__setattr__(self, "advantage_mode", ALGORITHM_BASELINES[self.rl_algorithm])  # the RL baseline

    @property
    def effective_critic_learning_rate(self) -> float:
        """The critics' learning rate (``critic_learning_rate``, else the agents'), for iac/maac."""
        return self.critic_learning_rate if self.critic_learning_rate is not None else self.agent_learning_rate


MARLHFConfig = config_class(
    "MARLHFConfig", "marlhf", module=__name__, defaults={**MADPO_DEFAULTS, **MARLHF_CRITIC_DEFAULTS},
    bases=(_LearnedReward,),
    doc="Settings of a :class:`engine.preference.marlhf.MARLHFTrainer` run (CoMLRL 1.4.3's ``MARLHFConfig`` "
        "names and defaults): the pairs' settings, the reward model's, and the settings of the RL stage "
        "(``rl_algorithm``: a MAGRPO-family baseline, or iac/maac with the critic settings).",
)


class _IterativeLearnedReward(_LearnedReward):
    iterative = True


MARLHFIterConfig = config_class(
    "MARLHFIterConfig", "marlhf_iter", module=__name__,
    defaults={**MADPO_DEFAULTS, "num_train_epochs": 2, "preference_num_candidates": 20,
              "preference_pairs_per_sample": 4, "pair_selection": "comparator_reward", "reward_num_train_epochs": 2,
              **MARLHF_CRITIC_DEFAULTS},
    bases=(_IterativeLearnedReward, MARLHFConfig),
    doc="Settings of a :class:`engine.preference.marlhf_iter.MARLHFIterTrainer` run (CoMLRL 1.4.3's "
        "``MARLHFIterConfig`` names and defaults): ``num_iterations`` rounds of collect pairs against "
        "``comparator_policy``, refit the reward model, RL against it.",
)
