"""The command service: create matches, decide commands, serve views and event streams."""
