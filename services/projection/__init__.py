"""The projection service: consumer groups over the partition streams into SQL read models,
and the QueryService over them.

Reading order:
    bootstrap    the composition root (settings, Redis store, SQL engine, registry)
    app          ProjectionApp: consume, serve, rebuild, migrate
    projector    one transaction per batch, exactly once per event (the core)
    rating_book  OpenSkill ratings in SQL, independent of arrival order
    runner       the consumer-group loop (XREADGROUP, XAUTOCLAIM, XACK after commit)
    lag          lag as an OpenTelemetry gauge and a log line
    retention    finished, archived matches leave Redis
    divergence   matches whose store went back and was written on: flagged for a rebuild
    rebuild      every read model again from the streams
    schema       Alembic migrations (migrations/)
    entrypoints/grpc_server   famiglia.v1.QueryService
"""
