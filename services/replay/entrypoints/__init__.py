"""Ways in: gRPC (famiglia.v1.ReplayService)."""
