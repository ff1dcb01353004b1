"""Bot policies, pure: they choose from a seat's View and legal commands only.

Reading order: policy.py (the API: Decision, Policy, make_policy), random_policy.py,
evaluate.py (one small evaluator per game), search.py, heuristic.py (one-ply),
ismcts.py (information-set MCTS), arena.py (engine-level matches), standings.py
(tournament tables with OpenSkill), games.py (which engines are playable),
toy.py (a tiny test game). No Celery, Redis or gRPC here; services/bots runs them.
"""

from .policy import POLICY_NAMES, Decision, Policy, PolicySpec, UnknownPolicy, make_policy

__all__ = ["POLICY_NAMES", "Decision", "Policy", "PolicySpec", "UnknownPolicy", "make_policy"]
