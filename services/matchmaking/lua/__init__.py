"""Lua scripts of the ticket store (loaded with importlib.resources, run by EVALSHA)."""
