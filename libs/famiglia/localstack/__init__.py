"""The embedded stack: a local redis-server and every service on one machine."""
