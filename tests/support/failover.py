"""A Redis failover on real redis-servers, for tests: a primary and its replica, and the address
the services are given, a small TCP proxy whose upstream is switched. Connections made after the
switch go to the new primary, those open stay on the node they were opened to (now a replica),
as with a host name that resolves anew after a failover."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import redis

from famiglia.localstack.redis_server import RedisServer


class SwitchingProxy:
    """Forwards each connection to `upstream` (a port) as it was when the connection came."""

    def __init__(self, upstream: int) -> None:
        self.upstream = upstream
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0
        self._sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def _accept(self) -> None:
        while True:
            try:
                near, _ = self.listener.accept()
            except OSError:
                return
            try:
                far = socket.create_connection(("127.0.0.1", self.upstream))
            except OSError:
                near.close()
                continue
            self.connections += 1
            self._sockets += [near, far]
            for source, sink in ((near, far), (far, near)):
                threading.Thread(target=self._pump, args=(source, sink), daemon=True).start()

    @staticmethod
    def _pump(source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for end in (source, sink):
            try:
                end.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        try:
            self.listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        except OSError:
            pass
        self.listener.close()
        for end in self._sockets:
            end.close()


@contextmanager
def primary_and_replica(tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    """A primary and its replica, started, and stopped at the end."""
    primary = RedisServer(data_dir=tmp_path / "primary", extra_args=("--repl-diskless-sync-delay", "0")).start()
    try:
        replica = RedisServer(data_dir=tmp_path / "replica",
                              extra_args=("--replicaof", "127.0.0.1", str(primary.port),
                                          "--repl-diskless-sync-delay", "0")).start()
        try:
            yield primary, replica
        finally:
            replica.stop()
    finally:
        primary.stop()


def in_sync(primary: RedisServer, replica: RedisServer, *, timeout: float = 30.0) -> None:
    """Wait until `replica` has every write `primary` took, and `primary` counts it online (a
    FAILOVER TO it is refused before)."""
    old, new = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
    try:
        deadline = time.monotonic() + timeout
        while True:
            mine, its = old.info("replication"), new.info("replication")
            online = any(isinstance(v, dict) and v.get("state") == "online" and v.get("port") == replica.port
                         for k, v in mine.items() if k.startswith("slave"))
            if (online and its.get("master_link_status") == "up"
                    and its.get("slave_repl_offset", -1) >= mine.get("master_repl_offset", 0)):
                return
            assert time.monotonic() < deadline, f"the replica never caught up: {its}"
            time.sleep(0.02)
    finally:
        old.close()
        new.close()


def coordinated_failover(primary: RedisServer, replica: RedisServer, proxy: SwitchingProxy,
                         *, timeout: float = 30.0) -> None:
    """Redis's own FAILOVER: `primary` waits for `replica` to catch up and becomes its replica
    (its blocked clients unblocked with an error, every write refused READONLY from then on), and
    `replica` the primary; then the address leads to the new primary. Nothing acknowledged is lost."""
    in_sync(primary, replica, timeout=timeout)
    old, new = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
    try:
        old.execute_command("FAILOVER", "TO", "127.0.0.1", replica.port, "TIMEOUT", int(timeout * 1000))
        deadline = time.monotonic() + timeout
        while new.info("replication").get("role") != "master" or old.info("replication").get("role") != "slave":
            assert time.monotonic() < deadline, "the failover never ended"
            time.sleep(0.02)
        proxy.upstream = replica.port
    finally:
        old.close()
        new.close()


def fail_over_by_hand(primary: RedisServer, replica: RedisServer, *, timeout: float = 30.0) -> None:
    """A failover as an operator makes one (docs/operations.md, "A Redis failover"): `replica`
    promoted (`REPLICAOF NO ONE`), then `primary` demoted to its replica (`REPLICAOF host port`).
    The address is left where it leads (switch the proxy's upstream for that)."""
    in_sync(primary, replica, timeout=timeout)
    old, new = redis.Redis(port=primary.port), redis.Redis(port=replica.port)
    try:
        new.execute_command("REPLICAOF", "NO", "ONE")
        old.execute_command("REPLICAOF", "127.0.0.1", replica.port)
        assert old.info("replication")["role"] == "slave" and new.info("replication")["role"] == "master"
    finally:
        old.close()
        new.close()
