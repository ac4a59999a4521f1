"""Job execution: the Celery app, the run executor, the database sink and the submit/stop client."""
