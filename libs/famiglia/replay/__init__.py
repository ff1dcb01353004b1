"""Replays: the state of a match at any event, export, import and verification.

Pure logic over envelopes (no gRPC server, no Redis connection of its own), in
reading order:

- `sources`   the EventSource port (read a match, find an event id) and its
              bindings: the hot event store, the SQL archive, an in-memory archive;
- `timeline`  one match's envelopes and its folded states, with a snapshot every
              K events so the state at any event folds at most K events;
- `access`    who may see what: seat, spectator, or everything once it is over;
- `export`    the versioned MatchExport file (JSON or binary);
- `seat_changes` the server's `seat_left` / `seat_returned` events: their rules (what a
              verification and an import check) and their text;
- `verify`    re-running recorded commands through today's engine;
- `toy`       a tiny game with secrets, for tests and the benchmark.
"""
