"""gRPC plumbing shared by every service: server setup and readiness, errors with rule codes, tracing, auth."""
