"""Runtime settings, read from ``COOPLAB_*`` environment variables through :func:`get_settings`.

Nothing reads the environment at import time: every caller asks ``get_settings()`` when it needs a
value, so tests and the CLI can change the environment before use. The engine reads no environment
variables: :func:`operator_permissions` builds the one value the engine is handed
(:class:`engine.permissions.operator.OperatorPermissions`: the task module allowlist, the UNSAFE sandbox
switch, the API hosts each key may go to, the remote-code permission, the vLLM venv's python and, for
the processes that train, the ``COOPLAB_API_KEY_*`` keys),
:func:`apply_host_memory_setting` whether a team training on the CPU keeps the memory it frees, and
:meth:`Settings.preflight_hub_cache_dirs` tells the pre-flight checks where the Hugging Face cache is.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import Field, SecretStr, field_validator

from jobs.env_settings import EnvSettings

if TYPE_CHECKING:
    from engine.permissions.operator import OperatorPermissions


class Settings(EnvSettings):
    """Where data lives and which servers to talk to (each field from ``COOPLAB_<FIELD>``)."""

    env_prefix = "COOPLAB_"

    home: Path = Field(Path(".cooplab"), description="Data directory: database, broker folders, checkpoints, logs.")
    database_url: str | None = Field(None, description="SQLAlchemy URL; default sqlite:///<home>/cooplab.db.")
    broker_url: str | None = Field(None, description="Celery broker; default the filesystem transport under home.")
    result_backend: str | None = Field(None, description="Celery result backend; default matches the broker.")
    log_level: str = Field("INFO", description="Log level of the app and workers.")
    heartbeat_timeout_s: float = Field(60.0, gt=0, description="A running run with an older heartbeat is lost.")
    stop_grace_s: float = Field(30.0, ge=0, description="Seconds a run may take to stop before it is terminated.")
    db_outage_s: float = Field(
        60.0, ge=0, le=3600, description="How long a job's writes (steps, metrics, checkpoints) wait and retry "
        "while the database is unreachable or locked before the run fails; training pauses meanwhile.")
    collective_timeout_s: float = Field(
        600.0, gt=0, description="parallel_training: fsdp: seconds a rank waits in a collective for the others, "
        "and how long a rank may stay behind the others before its job names it frozen and ends the run.")
    visibility_timeout_s: float = Field(
        24 * 3600.0, ge=60, description="Redis broker: seconds a delivered, unacknowledged run message stays "
        "reserved before Redis hands it to another worker. Long: a run trains for hours with its message "
        "unacknowledged, and each redelivery is only refused. Short: the message of a worker that died unseen "
        "is redelivered sooner.")
    resend_after_s: float = Field(
        10.0, ge=0, le=3600, description="A queued run missing from the broker (Redis restarted without "
        "persistence, a flushed queue) is sent again once it has been queued this long and was missing at two "
        "looks a maintenance interval apart. Below it a run's message may still be on its way to the broker.")
    task_modules: str = Field(
        "", description="Modules run configs may name tasks (and custom system schedules) from, as "
        "'package.module:factory': comma-separated module names or package prefixes, e.g. mylab.tasks,otherpkg. "
        "Built-in tasks and installed cooplab.tasks entry points are always allowed; nothing else is.")
    require_cached_models: bool = Field(
        True, description="Before a run is queued, a Hugging Face model id must already be in this machine's "
        "Hugging Face cache (runs load models offline). Set false where workers download models themselves.")

    unsafe_sandbox_without_isolation: bool = Field(
        False, description="UNSAFE: where bubblewrap cannot isolate model-written code, run it anyway with "
        "resource limits and an in-interpreter guard only (bypassable: it may read this user's files and reach "
        "local services). Off by default: such code is then refused.")
    api_hosts: str = Field(
        "", description="Where a run config's API comparator may send requests and keys (engine.permissions.outbound): "
        "comma-separated entries, COOPLAB_API_KEY_NAME=host[:port] to let that key go to the host (repeat the "
        "variable for more hosts), host[:port] alone for a host reachable without a key. No key goes to an "
        "unlisted host; plain http and private, loopback or link-local addresses only to listed ones. E.g. "
        "COOPLAB_API_KEY_OPENAI=api.openai.com,COOPLAB_API_KEY_LAB=llm.lab.internal:8000.")
    allow_remote_code: bool = Field(
        False, description="Let run configs ask for code that comes with a model (model_kwargs trust_remote_code, "
        "hub kernels, attention other than eager/sdpa/flex_attention): its Python then runs in the trainer. Off "
        "by default: such configs are refused, and a folder's auto_map never runs.")
    vllm_python: str = Field(
        ".venv-vllm/bin/python", min_length=1, description="The python of the vLLM venv (scripts/install_vllm.sh) "
        "that rollout_backend: vllm starts its engines with, as the worker's user (relative: to the working "
        "folder, then the project root). An operator setting only: a run config may not name an interpreter.")
    data_roots: str = Field(
        "", description="Folders run configs may read files from besides the data directory, the project's "
        "bundled data and the Hugging Face hub cache (comma-separated absolute paths): a task's dataset file, "
        "a model or tokenizer folder, a comparator checkpoint. A path elsewhere (symlinks and .. resolved) is "
        "refused before the run is stored and again when it is loaded.")
    worker_preload: bool = Field(
        True, description="A worker imports torch, transformers and the trainer once, before it forks job "
        "processes, so each run starts with them loaded instead of importing them (seconds of CPU per run). The "
        "worker never initialises CUDA either way. Set false for a worker parent that stays small (measured: 96 MiB resident instead of 403 MiB).")
    resource_interval_s: float = Field(
        15.0, ge=0, le=3600, description="Seconds between the samples of a run's resource use that its job records "
        "as metrics (resources/cpu_percent, rss_mib, gpu_util_percent, gpu_memory_mib: the job's process tree and "
        "its GPUs; jobs.resource_metrics), plus one when training ends. 0 turns them off.")
    job_threads: int | None = Field(
        None, ge=1, le=4096, description="torch CPU threads per job process (and per `cooplab train`). Default: "
        "the operator's OMP_NUM_THREADS, else the cores the worker may use divided by its --slots; the agents that "
        "compute at once share a job's threads (jobs.cpu_threads).")
    keep_freed_memory: bool = Field(
        True, description="A job, `cooplab train` or `cooplab eval` whose team runs on the CPU keeps the memory "
        "it frees for the next step instead of handing it back to the kernel (faster steps; the process holds "
        "its peak memory until it exits). Set false to keep malloc's own policy.")

    # The resource budget of a run config (engine.schema.budget), checked before a run is stored and again
    # by the worker. Generous for real research; raise one where the machines can take more.
    max_tokens_per_step: int = Field(
        100_000_000, ge=1, description="Tokens one training step (or one preference collection call, or one "
        "evaluation) may sample: items x agents x completions per agent x max_new_tokens, the rollout tree included.")
    max_joint_actions_per_step: int = Field(
        1_000_000, ge=1, description="Joint actions (team-reward evaluations) one step may score: items x K "
        "(aligned) or K^N (cross) per node x the nodes of the rollout tree.")
    max_samples_per_node: int = Field(
        4096, ge=1, description="Samples per agent and node: num_generations, preference_num_candidates, "
        "comparator_num_candidates, eval_samples_per_item.")
    max_iterations: int = Field(
        1_000_000, ge=1, description="Repetitions: max_steps, num_train_epochs, num_iterations, num_inner_epochs, "
        "reward_num_train_epochs, a system's rounds.")
    max_eval_samples: int = Field(100_000, ge=1, description="Evaluation items per evaluation (eval_num_samples).")
    max_transcripts_per_step: int = Field(
        1000, ge=0, description="Episodes recorded per step (transcripts_per_step, a system's transcripts_per_round).")
    max_name_length: int = Field(
        128, ge=1, le=200, description="Characters of a run, tag, agent or system-trainer name (at most 200, the "
        "store's column).")
    device_memory_gib: float | None = Field(
        None, gt=0, description="GiB of one GPU the workers train on: pre-flight refuses a run on a GPU queue whose "
        "agents' full fine-tuning cannot fit it (engine.schema.memory). Unset: not checked.")

    # The size of a study (jobs.study_limits), counted before any point is expanded, and the evaluations that
    # may wait or run at once (jobs.eval_queue): each refusal names the count, the limit and the setting.
    max_study_points: int = Field(
        1000, ge=1, description="Points of one study: the grid's combinations, or random search's samples.")
    max_study_seeds: int = Field(100, ge=1, description="Seeds per point of one study (a count or a list).")
    max_study_runs: int = Field(1000, ge=1, description="Runs (children) of one study: points x seeds.")
    max_study_expand_s: float = Field(
        60.0, gt=0, description="Seconds a study's expansion (every point's config built and checked) may take "
        "before the study is refused.")
    max_queued_evaluations_per_run: int = Field(
        16, ge=1, description="Evaluation requests of one run queued or running at once; one more is refused.")
    max_queued_evaluations: int = Field(
        128, ge=1, description="Evaluation requests of all runs queued or running at once; one more is refused.")

    @field_validator("api_hosts")
    @classmethod
    def _api_hosts(cls, value: str) -> str:
        from engine.permissions.outbound import parse_api_hosts  # torch-free

        return str(parse_api_hosts(value))

    @field_validator("task_modules")
    @classmethod
    def _module_names(cls, value: str) -> str:
        from engine.permissions.task_modules import normalise_modules  # torch-free

        return ",".join(normalise_modules(value))

    @field_validator("data_roots")
    @classmethod
    def _absolute_roots(cls, value: str) -> str:
        roots = [part.strip() for part in value.split(",") if part.strip()]
        relative = [root for root in roots if not Path(root).expanduser().is_absolute()]
        if relative:
            raise ValueError(f"COOPLAB_DATA_ROOTS: {relative[0]!r} is not an absolute path; list absolute folders, "
                             f"comma-separated, e.g. /srv/datasets,/mnt/models")
        return ",".join(roots)

    @property
    def read_roots(self) -> list[Path]:
        """Where a run config may read files (:mod:`engine.permissions.read_paths`): the data directory, the
        project's bundled data, the Hugging Face hub cache and ``COOPLAB_DATA_ROOTS``."""
        from engine.permissions.read_paths import BUNDLED_DATA  # torch-free

        listed = [Path(root).expanduser() for root in self.data_roots.split(",") if root]
        return [self.data_dir, BUNDLED_DATA, *hf_hub_cache_dirs(), *listed]

    @property
    def task_module_list(self) -> tuple[str, ...]:
        """The task module allowlist as a tuple of module names."""
        return tuple(name for name in self.task_modules.split(",") if name)

    def preflight_hub_cache_dirs(self) -> list[Path] | None:
        """Where pre-flight looks for hub model ids; None (not checked) without ``require_cached_models``."""
        return hf_hub_cache_dirs() if self.require_cached_models else None

    @property
    def heartbeat_interval_s(self) -> float:
        """How often a running job refreshes its heartbeat: a quarter of the timeout, 0.2 s to 10 s."""
        return min(10.0, max(0.2, self.heartbeat_timeout_s / 4))

    @property
    def maintenance_interval_s(self) -> float:
        """How often workers and the app look for lost runs and overdue stops (0.2 s to 10 s)."""
        shortest = min(self.heartbeat_timeout_s, self.stop_grace_s or self.heartbeat_timeout_s)
        return min(10.0, max(0.2, shortest / 4))

    @property
    def data_dir(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_dir / 'cooplab.db'}"

    @property
    def broker_dir(self) -> Path:
        return self.data_dir / "broker"

    @property
    def resolved_broker_url(self) -> str:
        # "localhost" names no server (the filesystem transport ignores it); without a host kombu logs
        # "No hostname was supplied. Reverting to default 'localhost'" on every connection.
        return self.broker_url or "filesystem://localhost//"

    @property
    def resolved_result_backend(self) -> str:
        if self.result_backend:
            return self.result_backend
        if self.resolved_broker_url.startswith(("redis://", "rediss://")):
            return self.resolved_broker_url
        return f"file://{self.data_dir / 'results'}"

    @property
    def runs_dir(self) -> Path:
        return self.data_dir / "runs"

    @property
    def logs_dir(self) -> Path:
        return self.data_dir / "logs"

    def ensure_dirs(self) -> None:
        """Create the data directory layout (idempotent), owner-only (0700); folders of it that other
        users can read are tightened, with a warning (:mod:`jobs.data_permissions`)."""
        from jobs.data_permissions import private_folders

        private_folders((self.data_dir, self.broker_dir, self.broker_dir / "in", self.broker_dir / "processed",
                         self.runs_dir, self.logs_dir, self.data_dir / "results"))

    ui_password_hash: str | None = Field(
        None, description="Dashboard sign-in (needed off 127.0.0.1): a hash from `cooplab hash-password`.")
    ui_allowed_hosts: str = Field(
        "", description="Host names the dashboard answers to besides localhost, IP addresses and the address it "
        "listens on (comma-separated; '*.example.com' matches subdomains), e.g. the name of a proxy in front of "
        "it. Any other Host header is refused (DNS rebinding).")
    ui_trusted_proxies: str = Field(
        "", description="Addresses (or CIDR networks) of reverse proxies whose X-Forwarded-For the dashboard "
        "believes, comma-separated. Empty: X-Forwarded-For is ignored and a client is its connection's address.")
    ui_max_downloads: int = Field(
        4, ge=1, le=64, description="Downloads the dashboard serves at once; one more is answered 503.")

    # The artifact store (jobs.artifacts): where checkpoints and model folders are kept for every machine.
    artifacts_url: str = Field(
        "", description="Where run artifacts are stored: empty for the local data directory, "
        "file:///mnt/shared/cooplab for a shared filesystem, s3://bucket/prefix for an S3-compatible server "
        "(endpoint and credentials from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, "
        "AWS_DEFAULT_REGION).")
    artifacts_create_bucket: bool = Field(
        False, description="Create the bucket (or folder) of COOPLAB_ARTIFACTS_URL when it does not exist, "
        "instead of refusing to start.")
    store_outage_s: float = Field(
        60.0, ge=0, le=86400, description="How long a job's uploads to the artifact store (checkpoints, then its "
        "outputs at the end) wait and retry while the store is unreachable before the run fails naming the store; "
        "training goes on meanwhile, its checkpoints held on the local disk.")
    artifacts_tries: int = Field(
        5, ge=1, le=20, description="Tries of each artifact store operation on connection errors, timeouts and "
        "server errors, with backoff (0.5 s, 1 s, 2 s, 4 s, then 8 s) before it fails naming the store.")
    artifacts_retry_base_s: float = Field(
        0.5, ge=0, le=60, description="The first wait between artifact store tries; each next one doubles.")
    artifacts_part_mib: int = Field(
        16, ge=5, le=5120, description="Files of this many MiB or more go to an S3 store in parts of this size.")
    artifacts_signing_key: SecretStr | None = Field(
        None, min_length=16, description="A secret (16 characters or more, the same on every worker and dashboard) "
        "that signs each stored folder's completion marker (HMAC-SHA256); markers without the right signature "
        "are then refused, so whoever else can write the bucket or shared folder cannot forge a checkpoint. "
        "Unset: markers are unsigned and the store's own access control is the boundary.")

    @property
    def artifacts_cache_dir(self) -> Path:
        """Where folders downloaded from the artifact store are kept on this machine."""
        return self.data_dir / "artifact-cache"


class S3Env(EnvSettings):
    """The standard AWS variables an S3 artifact store is reached with (read when instantiated)."""

    aws_endpoint_url: str | None = None
    aws_endpoint_url_s3: str | None = None
    aws_access_key_id: str | None = None
    aws_secret_access_key: SecretStr | None = None
    aws_session_token: SecretStr | None = None
    aws_default_region: str | None = None
    aws_region: str | None = None


def get_settings() -> Settings:
    """Read the settings from the environment now."""
    return Settings()


class HubCacheEnv(EnvSettings):
    """The Hugging Face variables that say where its hub cache is (read when instantiated)."""

    hf_hub_cache: str | None = None
    huggingface_hub_cache: str | None = None
    hf_home: str | None = None
    xdg_cache_home: str | None = None


def hf_hub_cache_dirs(env: HubCacheEnv | None = None) -> list[Path]:
    """The Hugging Face hub cache, resolved as ``huggingface_hub`` does: ``HF_HUB_CACHE``, else
    ``HF_HOME/hub``, else ``$XDG_CACHE_HOME/huggingface/hub`` (default ``~/.cache/huggingface/hub``)."""
    env = env or HubCacheEnv()
    explicit = env.hf_hub_cache or env.huggingface_hub_cache
    if explicit:
        return [Path(explicit).expanduser()]
    home = env.hf_home or str(Path(env.xdg_cache_home or "~/.cache") / "huggingface")
    return [Path(home).expanduser() / "hub"]


def operator_permissions(settings: Settings, keys: Mapping[str, str] | None = None) -> OperatorPermissions:
    """The operator's permissions from ``settings``, as one frozen value the engine is handed where it reads
    them: the task module allowlist, whether the code sandbox may run without OS isolation (UNSAFE), the
    API hosts, whether models may bring code and the vLLM venv's python. ``keys``: the environment whose
    ``COOPLAB_API_KEY_*`` entries a run config may name (the job executor and ``cooplab train`` pass
    their process environment; other entries are dropped); None hands no keys (a process that trains nothing)."""
    from engine.permissions.operator import OperatorPermissions  # torch-free

    return OperatorPermissions(
        task_modules=settings.task_module_list, unisolated_sandbox=settings.unsafe_sandbox_without_isolation,
        api_hosts=settings.api_hosts, allow_remote_code=settings.allow_remote_code,
        vllm_python=settings.vllm_python, api_keys=keys,
    )


def apply_host_memory_setting(settings: Settings) -> None:
    """Tell the engine whether a team training on the CPU keeps the memory it frees
    (``COOPLAB_KEEP_FREED_MEMORY``, :mod:`engine.trainer.host_memory`). Imports the trainer (torch): the
    processes that train or evaluate call it before building a trainer, never the dashboard."""
    from engine.trainer import host_memory

    host_memory.set_policy(keep=settings.keep_freed_memory)
