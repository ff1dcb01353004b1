"""gRPC plumbing shared by every service: server setup, errors with rule codes, tracing, auth."""
