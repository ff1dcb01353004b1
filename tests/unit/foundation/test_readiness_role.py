"""`redis_primary`'s reading of HELLO's reply (the real servers: tests/integration/test_redis_failover.py)."""

from __future__ import annotations

from typing import Any

import pytest
from redis.exceptions import ResponseError

from famiglia.grpcutil.readiness import RedisReplica, _PrimaryCheck


class Client:
    """A client whose pipeline answers PING and HELLO with `hello`."""

    def __init__(self, hello: Any) -> None:
        self.hello = hello
        self.dropped = 0
        self.connection_pool = self

    def pipeline(self, transaction: bool = True) -> Client:
        return self

    def ping(self) -> None:
        pass

    def execute_command(self, *args: Any) -> None:
        pass

    def execute(self, raise_on_error: bool = True) -> list[Any]:
        if raise_on_error and isinstance(self.hello, Exception):
            raise self.hello
        return [True, self.hello]

    def disconnect(self) -> None:
        self.dropped += 1


@pytest.mark.parametrize("hello", [{b"role": b"master"}, {"role": "master"}, [b"role", b"master"],
                                   {b"role": b"primary"}, {b"server": b"a proxy that names no role"},
                                   ResponseError("unsupported command 'hello'")])
def test_a_primary_or_a_server_naming_no_role_is_ready(hello: Any) -> None:
    _PrimaryCheck(Client(hello), "redis://x")()


@pytest.mark.parametrize("hello", [{b"role": b"replica"}, [b"server", b"redis", b"role", b"replica"]])
def test_a_replica_is_not_and_its_connection_is_made_again(hello: Any) -> None:
    client = Client(hello)
    with pytest.raises(RedisReplica, match="answers as a replica: every write is refused READONLY"):
        _PrimaryCheck(client, "redis://x")()
    assert client.dropped == 1


def test_a_ping_refused_is_not_ready_whatever_hello_says() -> None:
    from redis.exceptions import BusyLoadingError

    class Loading(Client):
        def execute(self, raise_on_error: bool = True) -> list[Any]:
            return [BusyLoadingError("Redis is loading the dataset in memory"), {b"role": b"master"}]

    with pytest.raises(BusyLoadingError):
        _PrimaryCheck(Loading({}), "redis://x")()
