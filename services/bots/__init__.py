"""The bots service: Celery workers that play bot seats, the dispatcher that queues
their decisions and turn clocks, and tournaments of bot policies.

Reading order: bootstrap.py (the composition root), handlers.py (a bot decision,
a turn clock), dispatcher.py (partition streams -> tasks), tournaments.py
(plans, progress, standings), entrypoints/celery_app.py (the Celery app and its
tasks), entrypoints/grpc_server.py (famiglia.v1.TournamentService),
__main__.py (`python -m services.bots`: TournamentService + dispatcher),
worker.py (`python -m services.bots.worker`: a real `celery worker`).
"""
