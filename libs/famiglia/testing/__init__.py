"""Helpers shared by tests, bots and benchmarks: random play and golden playthroughs. Pure."""
