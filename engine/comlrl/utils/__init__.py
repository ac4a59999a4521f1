"""CoMLRL's ``comlrl.utils``: the helpers its scripts import, with CoMLRL's names and signatures."""

from engine.comlrl.utils.checkpoint import read_checkpoint_metadata
from engine.comlrl.utils.distributed import DistributedContext, local_context, unwrap_model
from engine.comlrl.utils.formatters import build_formatters
from engine.comlrl.utils.model_loading import infer_model_name, resolve_model_sources
from engine.comlrl.utils.reference_kl import (
    clone_reference_models,
    load_reference_models_from_sources,
    reference_kl_coef,
    reference_kl_enabled,
    reference_kl_for_sequence,
    resolve_reference_devices,
    validate_reference_kl_config,
)
from engine.comlrl.utils.reward_processor import RewardProcessors
from engine.comlrl.utils.reward_utils import (
    call_reward_function,
    normalize_reward_lengths,
    resolve_reward_range,
    set_reward_range,
)
from engine.comlrl.utils.tokenizer_utils import (
    apply_tokenizer_specials,
    ensure_pad_token,
    ensure_tokenizer,
    resolve_tokenizers,
)

__all__ = [
    "read_checkpoint_metadata", "build_formatters", "ensure_pad_token", "ensure_tokenizer", "apply_tokenizer_specials",
    "resolve_tokenizers", "infer_model_name", "resolve_model_sources", "clone_reference_models",
    "load_reference_models_from_sources", "reference_kl_coef", "reference_kl_enabled", "reference_kl_for_sequence",
    "resolve_reference_devices", "validate_reference_kl_config", "RewardProcessors", "call_reward_function",
    "normalize_reward_lengths", "resolve_reward_range", "set_reward_range", "DistributedContext", "local_context",
    "unwrap_model",
]
