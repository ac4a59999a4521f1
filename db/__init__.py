"""Storage: SQLAlchemy models, sessions, the store API and migrations (no torch, no celery)."""
