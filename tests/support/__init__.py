"""Test helpers shared across suites (fixtures for real servers the tests start themselves)."""
