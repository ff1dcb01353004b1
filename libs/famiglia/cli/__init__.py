"""The `famiglia` command line: run, up, down, status, play (and more as services land)."""
