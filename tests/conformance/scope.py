"""Which of CoMLRL 1.4.3's tests the conformance run (:mod:`tests.conformance.runner`) holds CoopLab to.

Test ids are ``<file>::<test>[<parameters>]`` as pytest names them (without the ``tests/`` folder);
keys are ``fnmatch`` patterns, values the reason. A test no list matches is *public*: it exercises
what a CoMLRL user script touches (configs and their validation, constructors, ``train()``, reward and
formatter conventions, multi-turn transitions, exported utilities) and must pass through
``engine.comlrl``.

* ``OUT_OF_SCOPE``: CoMLRL internals: private methods and attributes (``_train_step_returns``,
  ``_policy_eval``, ``_checkpoint_progress`` ...), its checkpoint file format and resume machinery
  (``capture_trainer_state``, ``_encode``/``_decode``, asset pools), tests built on its private
  mixins and test doubles (``TrainingCheckpointMixin``, ``TinyTrainer``, ``toy_trainer`` made with
  ``object.__new__``). Not run (``--all`` runs them for information); a file whose every test is out
  of scope (pattern ``<file>::*``) is not even imported.
* ``DEVIATIONS``: public tests CoopLab fails on purpose; each is in the table of ``docs/comlrl.md``.
* ``PENDING``: public tests not compatible yet (issue #42, in progress). The run fails when one of
  them passes, so this list only shrinks.
"""

from __future__ import annotations

# Tests per file in CoMLRL 1.4.3's suite as pytest collects it against CoMLRL itself (720, all passing
# there): the per-file "out of scope" count is the file's total less the tests run.
TESTS_PER_FILE: dict[str, int] = {
    "test_actor_critic.py": 37,
    "test_centralized_comparator.py": 7,
    "test_centralized_magrpo.py": 7,
    "test_centralized_preference.py": 31,
    "test_checkpoint_assets.py": 48,
    "test_checkpoint_files.py": 39,
    "test_checkpoint_metadata.py": 20,
    "test_checkpoint_models.py": 6,
    "test_checkpoint_nested.py": 22,
    "test_checkpoint_preference.py": 80,
    "test_checkpoint_preference_specials.py": 16,
    "test_checkpoint_rl.py": 50,
    "test_checkpoint_rng.py": 25,
    "test_checkpoint_state.py": 37,
    "test_checkpoint_tokenizer_specials.py": 12,
    "test_config.py": 80,
    "test_joint_policy.py": 48,
    "test_magrpo.py": 10,
    "test_parallel_agent_tasks.py": 6,
    "test_preference.py": 48,
    "test_reference_kl.py": 33,
    "test_trainer_init.py": 40,
    "test_utils.py": 18,
}

_CHECKPOINT_INTERNALS = ("CoMLRL's checkpoint format and resume machinery (TrainingCheckpointMixin, "
                         "capture/restore_trainer_state, _checkpoint_* cursors and test doubles built on them); "
                         "CoopLab's checkpoints are its own (docs/engine.md, Checkpoints)")

OUT_OF_SCOPE: dict[str, str] = {
    # whole files
    "test_magrpo.py::*": "subclasses MAGRPOTrainer and replaces its private rollout and loss methods "
                         "(_generate_completions_with_external_prompts, _compute_loss_with_gradients, "
                         "_train_step_returns, _compute_rewards)",
    "test_parallel_agent_tasks.py::*": "CoMLRL's private per-agent thread helpers (_run_agent_tasks, "
                                       "_parallel_agent_mode_enabled, _drain_ready_agent_buffers)",
    "test_checkpoint_assets.py::*": "CoMLRL's checkpoint asset pool and resume output paths (_checkpoint_directory, "
                                    "_copy_checkpoint_asset, PreferenceReplayShard, preference.checkpointing)",
    "test_checkpoint_files.py::*": _CHECKPOINT_INTERNALS,
    "test_checkpoint_metadata.py::*": _CHECKPOINT_INTERNALS + " (read_checkpoint_metadata is tested on TinyTrainer's "
                                      "state file and its private W&B records)",
    "test_checkpoint_models.py::*": "interrupts training through the private _checkpoint_commit hook and compares "
                                    "_checkpoint_progress cursors",
    "test_checkpoint_nested.py::*": _CHECKPOINT_INTERNALS,
    "test_checkpoint_preference.py::*": "built on toy preference trainers made with object.__new__ and private "
                                        "hooks (_build_preference_dataset, _update_from_preference_batch, "
                                        "_init_reward_model, _checkpoint_progress)",
    "test_checkpoint_preference_specials.py::*": "calls the private _generate_completions/_sequence_log_prob and "
                                                 "CoMLRL's checkpoint internals",
    "test_checkpoint_rl.py::*": "scripted trainers overriding private hooks (_collect, _update, _init_fixture, "
                                "_train_checkpoint_epochs) and CoMLRL's checkpoint cursors",
    "test_checkpoint_rng.py::*": "CoMLRL's RNG capture and comparator RNG streams (_cuda_rng_routes, "
                                 "_comparator_rng_streams, capture_rng_state)",
    "test_checkpoint_state.py::*": _CHECKPOINT_INTERNALS,
    "test_checkpoint_tokenizer_specials.py::*": "CoMLRL's checkpoint restore of tokenizer special ids (_encode/_decode, "
                                                "_checkpoint_commit interrupts)",
    # single tests
    "test_actor_critic.py::test_expand_rewards_*": "private ActorCriticTrainerBase._expand_rewards on object.__new__",
    "test_actor_critic.py::test_maac_single_turn_does_not_dispatch_multi_turn_reward_override":
        "replaces private methods (_generate, _policy_eval, _critic_value_from_text, _resolve_turn_prompt)",
    "test_actor_critic.py::test_sequence_stats_exclude_prompt_and_trailing_tokens": "private _compute_sequence_stats",
    "test_actor_critic.py::test_policy_eval_*": "private _policy_eval on object.__new__",
    "test_actor_critic.py::test_ac_step_*": "private _ac_step on object.__new__",
    "test_actor_critic.py::test_log_metrics_logs_each_call_directly": "private _log_metrics/_last_train_log_step",
    "test_actor_critic.py::test_evaluate_collects_rollouts_in_eval_mode": "private _in_eval on a bare "
                                                                          "ActorCriticTrainerBase",
    "test_centralized_comparator.py::test_centralized_split_*": "private _split_centralized_comparator_outputs",
    "test_centralized_comparator.py::test_decentralized_path_does_not_call_centralized_generation":
        "private comparator generation methods on object.__new__",
    "test_centralized_magrpo.py::test_eval_passes_separate_roles_to_eval_logger": "private _centralized_eval_items",
    "test_centralized_magrpo.py::test_loss_matches_full_joint_sequence_policy_gradient":
        "private _compute_loss_with_gradients",
    "test_centralized_magrpo.py::test_wandb_does_not_claim_a_comparator": "private _init_wandb",
    "test_centralized_preference.py::test_joint_logprob_covers_both_roles_and_last_token": "private _sequence_log_prob",
    "test_centralized_preference.py::test_marlhf_joint_loss_uses_actor_device": "private _compute_loss_with_gradients",
    "test_centralized_preference.py::test_replay_stores_raw_joint_text_and_current_comparator_uses_same_prompt":
        "private replay and policy-checkpoint methods (_write_iteration_preference_pairs, _load_replay_shard)",
    "test_centralized_preference.py::test_eval_splits_roles_and_uses_task_reward":
        "private _centralized_eval_items/_reward_model_active",
    "test_centralized_preference.py::test_marlhf_reward_model_and_policy_train_on_joint_text":
        "replaces the private _init_reward_model",
    "test_centralized_preference.py::test_marlhf_actor_critic_backends_train_local_models":
        "replaces the private _init_reward_model",
    "test_centralized_preference.py::test_parse_failures_and_ac_metrics_stay_at_environment_boundary":
        "CoMLRL's internal CentralizedCollaboration helper class",
    "test_centralized_preference.py::test_comparator_sources_keep_joint_text":
        "private comparator methods (_generate_comparator_outputs_for_item, _save_initial_policy_checkpoint)",
    "test_joint_policy.py::test_marlhf_joint_loss_calls_sequence_log_prob_hook": "private _compute_loss_with_gradients",
    "test_joint_policy.py::test_joint_policy_gradient_matches_manual_objective": "private _compute_loss_with_gradients",
    "test_joint_policy.py::test_joint_loss_validates_alignment_and_handles_empty_batch":
        "private _compute_loss_with_gradients",
    "test_joint_policy.py::test_generation_with_eos_in_prompt_preserves_joint_boundaries_and_kl":
        "private _generate_completions",
    "test_joint_policy.py::test_real_generation_can_feed_joint_backward":
        "private _generate_completions/_compute_loss_with_gradients",
    "test_preference.py::*": "private preference helpers (_update_from_preference_batch, reward-distribution "
                             "charts, output-directory resolution on object.__new__, _sequence_log_prob)",
    "test_reference_kl.py::test_actor_critic_kl_shaping_*": "private _kl_shaped_reward",
    "test_reference_kl.py::test_magrpo_applies_reference_kl_to_returns": "private _apply_reference_kl_to_returns",
    "test_reference_kl.py::test_reference_kl_values_*": "private _reference_kl_values on object.__new__",
}

_AUTO = ("parallel_training='auto' is accepted: CoopLab's default (each agent in a thread of its own where it has "
         "compute of its own, else one after another); 'none' and 'mp' behave as CoMLRL's")
_AC_SAMPLES = ("num_generations > 1 with num_turns > 1 is accepted by IAC/MAAC: CoopLab rolls out K chains per item "
               "through every turn (CoMLRL refuses it); K=1, CoMLRL's only multi-turn choice, runs as in CoMLRL")

DEVIATIONS: dict[str, str] = {
    "test_config.py::test_config_rejects_invalid_field[*parallel_training='auto')]": _AUTO,
    "test_config.py::test_config_rejects_invalid_field[*(num_generations=2,num_turns=2)]": _AC_SAMPLES,
    "test_trainer_init.py::test_iac_multiturn_rejects_multiple_generations": _AC_SAMPLES,
    "test_trainer_init.py::test_maac_multiturn_rejects_multiple_generations": _AC_SAMPLES,
}

PENDING: dict[str, str] = {}
