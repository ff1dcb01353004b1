"""The replay service: any match as of any event, streamed, exported, imported, verified."""
