"""Runtime settings, read from ``COOPLAB_*`` environment variables through :func:`get_settings`.

Nothing reads the environment at import time: every caller asks ``get_settings()`` when it needs a
value, so tests and the CLI can change the environment before use. The engine reads no environment
variables: :func:`apply_engine_settings` hands it what it needs (the task module allowlist, the UNSAFE
sandbox switch), and :meth:`Settings.preflight_hub_cache_dirs` tells the pre-flight checks where the
Hugging Face cache is.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Where data lives and which servers to talk to."""

    model_config = SettingsConfigDict(env_prefix="COOPLAB_", extra="ignore")

    home: Path = Field(Path(".cooplab"), description="Data directory: database, broker folders, checkpoints, logs.")
    database_url: str | None = Field(None, description="SQLAlchemy URL; default sqlite:///<home>/cooplab.db.")
    broker_url: str | None = Field(None, description="Celery broker; default the filesystem transport under home.")
    result_backend: str | None = Field(None, description="Celery result backend; default matches the broker.")
    log_level: str = Field("INFO", description="Log level of the app and workers.")
    heartbeat_timeout_s: float = Field(60.0, gt=0, description="A running run with an older heartbeat is lost.")
    stop_grace_s: float = Field(30.0, ge=0, description="Seconds a run may take to stop before it is terminated.")
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

    @field_validator("task_modules")
    @classmethod
    def _module_names(cls, value: str) -> str:
        from engine.tasks.allowlist import normalise_modules  # torch-free

        return ",".join(normalise_modules(value))

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
        """Create the data directory layout (idempotent)."""
        for folder in (self.data_dir, self.broker_dir / "in", self.broker_dir / "processed",
                       self.runs_dir, self.logs_dir, self.data_dir / "results"):
            folder.mkdir(parents=True, exist_ok=True)

    ui_password_hash: str | None = Field(
        None, description="Dashboard sign-in (needed off 127.0.0.1): a hash from `cooplab hash-password`.")


def get_settings() -> Settings:
    """Read the settings from the environment now."""
    return Settings()


class HubCacheEnv(BaseSettings):
    """The Hugging Face variables that say where its hub cache is (read when instantiated)."""

    model_config = SettingsConfigDict(extra="ignore")

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


def apply_engine_settings(settings: Settings) -> None:
    """Hand the engine this process's operator settings: the task module allowlist and whether the code
    sandbox may run without OS isolation (UNSAFE)."""
    from engine.sandbox.boundary import allow_unisolated_sandbox  # torch-free
    from engine.tasks.allowlist import set_allowed_task_modules  # torch-free

    set_allowed_task_modules(settings.task_module_list)
    allow_unisolated_sandbox(settings.unsafe_sandbox_without_isolation)
