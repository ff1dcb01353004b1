"""A Redis that answers but refuses for now (a replica's READONLY after a failover, OOM past
maxmemory, MISCONF with its snapshot failing, LOADING, MASTERDOWN) is the store away: every
service answers UNAVAILABLE `store_unavailable`, which clients and bots retry, not INTERNAL,
which they do not. The reply errors here are made by redis-py's own parser from Redis's words."""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from redis._parsers.base import BaseParser

from famiglia.grpcutil.errors import store_away, unavailable
from famiglia.grpcutil.server import rpc
from tests.support.grpc_calls import Aborted, FakeCall

REFUSING = [
    "READONLY You can't write against a read only replica.",
    "READONLY You can't write against a read only replica. script: 6dee2053, on @user_script:1.",
    "OOM command not allowed when used memory > 'maxmemory'.",
    "MISCONF Redis is configured to save RDB snapshots, but it's currently unable to persist to disk. "
    "Commands that may modify the data set are disabled",
    "LOADING Redis is loading the dataset in memory",
    "MASTERDOWN Link with MASTER is down and replica-serve-stale-data is set to 'no'.",
    # Redis 6 wraps a command refused inside a script in an ERR
    "ERR Error running script (call to f_6dee2053): @user_script:40: -READONLY You can't write against a "
    "read only replica.",
    "ERR Error running script (call to f_6dee2053): @user_script:40: -OOM command not allowed when used "
    "memory > 'maxmemory'.",
    # a blocked command (a watch's XREAD BLOCK) cut short as its node turns replica: wrote nothing
    "UNBLOCKED force unblock from blocking operation, instance state changed (master -> replica?)",
]

OURS = [
    "WRONGTYPE Operation against a key holding the wrong kind of value",
    "ERR wrong number of arguments for 'xadd' command",
    "ERR Error running script (call to f_6dee2053): @user_script:40: -WRONGTYPE Operation against a key",
    "NOSCRIPT No matching script. Please use EVAL.",
    "ERR value is not an integer or out of range",
    "UNBLOCKED client unblocked via CLIENT UNBLOCK",  # someone's CLIENT UNBLOCK ... ERROR: not a failover
]


@pytest.mark.parametrize("reply", REFUSING)
def test_a_redis_refusing_for_now_is_the_store_away(reply: str) -> None:
    error = BaseParser.parse_error(reply)
    assert store_away(error)
    away = unavailable(error)
    assert away is not None and away.status == grpc.StatusCode.UNAVAILABLE and away.code == "store_unavailable"


@pytest.mark.parametrize("reply", OURS)
def test_a_command_redis_refuses_for_what_it_is_stays_a_failure_of_ours(reply: str) -> None:
    assert not store_away(BaseParser.parse_error(reply))
    assert unavailable(BaseParser.parse_error(reply)) is None


@pytest.mark.parametrize("reply", REFUSING[:5])
def test_an_rpc_failing_on_it_answers_unavailable_store_unavailable(reply: str) -> None:
    class Service:
        @rpc
        def Submit(self, request: Any, context: Any) -> None:
            raise BaseParser.parse_error(reply)

    call = FakeCall()
    with pytest.raises(Aborted):
        Service().Submit("r", call)
    assert call.status.code == grpc.StatusCode.UNAVAILABLE
    assert ("famiglia-code", "store_unavailable") in call.status.trailing_metadata
