"""The command-path benchmark counts redis-server's CPU beside the service's and the clients'."""

from __future__ import annotations

import os

import redis

from famiglia.bench.core import _process_cpu, _Run
from famiglia.bench.harness import redis_pid


def test_the_redis_pid_is_the_server_that_answers_and_its_cpu_grows_with_work(redis_url: str) -> None:
    pid = redis_pid(redis_url)
    assert pid > 0 and pid != os.getpid()
    before = _process_cpu(pid)
    with redis.Redis.from_url(redis_url) as client:
        client.register_script("local n = 0 for i = 1, 20000000 do n = n + i end return n")()
    assert _process_cpu(pid) > before


def test_no_redis_to_ask_counts_no_redis_cpu() -> None:
    assert redis_pid("redis://127.0.0.1:1/0") == 0
    assert _process_cpu(0) == 0.0


def test_cpu_per_call_is_each_side_over_every_call_of_the_runs() -> None:
    runs = [_Run(100.0, [0.001] * 3, service_cpu=0.3, client_cpu=0.6, redis_cpu=0.09),
            _Run(100.0, [0.001] * 1, service_cpu=0.1, client_cpu=0.2, redis_cpu=0.03)]
    service, clients, server = _Run.per_call(runs)
    assert (round(service, 6), round(clients, 6), round(server, 6)) == (0.1, 0.2, 0.03)
