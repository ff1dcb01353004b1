"""The matchmaking service: guest players, tickets, and the matcher that turns them into matches.

Reading order: store.py (Redis keys and Lua), players.py, creator.py (the CreateMatch
port), matcher.py (the loop), app.py (use cases), ratings.py, settings.py,
bootstrap.py (composition root), entrypoints/grpc_server.py, __main__.py.
The pure matching rules are in famiglia.matchmaking.
"""
