"""Polling for a reply: how many CPUs the machine left idle, read from /proc-style files,
and a bounded poll that hands back to the caller's usual wait."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import pytest

from famiglia import spinwait
from famiglia.spinwait import POLL_WHEN_IDLE_CPUS, IdleCpus, recv_polling


def _stat(path: Path, user: int, idle: int, iowait: int = 0) -> None:
    # user nice system idle iowait irq softirq steal, then a per-CPU line that must be ignored
    path.write_text(f"cpu  {user} 0 0 {idle} {iowait} 0 0 0 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\n")


def _loadavg(path: Path, running: int) -> None:
    path.write_text(f"0.50 0.40 0.30 {running}/120 4242\n")


@pytest.fixture()
def files(tmp_path: Path) -> tuple[Path, Path]:
    stat, loadavg = tmp_path / "stat", tmp_path / "loadavg"
    _stat(stat, user=1000, idle=1000)
    _loadavg(loadavg, running=1)
    return stat, loadavg


def _two_cpus(files: tuple[Path, Path]) -> tuple[Path, IdleCpus, float]:
    """A reader of `files` for a 2-CPU machine with a 0.1 s window, and when it began."""
    stat, loadavg = files
    cpus = IdleCpus(str(stat), str(loadavg), window=0.1, cpus=2)
    return stat, cpus, cpus._at


def test_idle_cpus_are_the_idle_share_of_the_window_times_the_cpus(files: tuple[Path, Path]) -> None:
    stat, loadavg = files
    cpus = IdleCpus(str(stat), str(loadavg), window=0.1, cpus=4)
    start = cpus._at
    _stat(stat, user=1000 + 30, idle=1000 + 10, iowait=0)  # 10 idle ticks of 40
    assert cpus.spare(start + 0.11) == pytest.approx(1.0)
    _stat(stat, user=1030 + 5, idle=1010 + 15, iowait=20)  # iowait is idle too: 35 of 40
    assert cpus.spare(start + 0.22) == pytest.approx(3.5)


def test_the_files_are_read_again_only_once_a_window(files: tuple[Path, Path]) -> None:
    stat, cpus, start = _two_cpus(files)
    _stat(stat, user=1000, idle=1020)
    assert cpus.spare(start + 0.11) == pytest.approx(2.0)
    _stat(stat, user=1040, idle=1020)  # busy now, but the window has not ended
    assert cpus.spare(start + 0.15) == pytest.approx(2.0)
    assert cpus.spare(start + 0.22) == pytest.approx(0.0)


def test_a_window_with_no_tick_keeps_the_last_figure(files: tuple[Path, Path]) -> None:
    stat, cpus, start = _two_cpus(files)
    _stat(stat, user=1010, idle=1010)
    assert cpus.spare(start + 0.11) == pytest.approx(1.0)
    assert cpus.spare(start + 0.22) == pytest.approx(1.0)  # same ticks: nothing measured


def test_the_process_own_polling_counts_as_idle(files: tuple[Path, Path]) -> None:
    stat, cpus, start = _two_cpus(files)
    _stat(stat, user=1020, idle=1000)  # both CPUs busy...
    cpus.polled = 0.05  # ...0.4 of a CPU of it our own polling over the 0.125 s window
    assert cpus.spare(start + 0.125) == pytest.approx(0.4)
    assert cpus.polled == 0.0  # counted once


def test_it_polls_only_with_idle_cpus_and_a_free_cpu_this_instant(files: tuple[Path, Path]) -> None:
    stat, cpus, start = _two_cpus(files)
    loadavg = files[1]
    _stat(stat, user=1004, idle=1016)  # 1.6 idle CPUs
    assert cpus.poll_now(start + 0.11)
    _loadavg(loadavg, running=3)  # more threads ready than CPUs
    assert not cpus.poll_now(start + 0.15)
    _loadavg(loadavg, running=2)
    _stat(stat, user=1004 + 18, idle=1016 + 2)  # 0.2 idle CPUs over the next window
    assert POLL_WHEN_IDLE_CPUS > 0.2
    assert not cpus.poll_now(start + 0.22)


def test_without_the_files_it_never_polls(tmp_path: Path) -> None:
    cpus = IdleCpus(str(tmp_path / "no-stat"), str(tmp_path / "no-loadavg"), window=0.1, cpus=2)
    assert not cpus.poll_now(cpus._at + 1.0)
    assert cpus.running() > 1000


def test_a_file_of_another_shape_reads_as_busy(tmp_path: Path) -> None:
    stat, loadavg = tmp_path / "stat", tmp_path / "loadavg"
    stat.write_text("intr 1 2 3\n")
    loadavg.write_text("garbage\n")
    cpus = IdleCpus(str(stat), str(loadavg), window=0.1, cpus=2)
    assert not cpus.poll_now(cpus._at + 1.0)


def test_the_machine_reader_is_one_per_process() -> None:
    assert spinwait.machine() is spinwait.machine()


def test_a_reply_already_there_is_read_at_once() -> None:
    left, right = socket.socketpair()
    with left, right:
        right.sendall(b"+OK\r\n")
        time.sleep(0.01)
        buffer = bytearray(64)
        assert recv_polling(left, buffer, 0.5) == 5
        assert bytes(buffer[:5]) == b"+OK\r\n"


def test_a_reply_that_comes_while_polling_is_read() -> None:
    import threading

    left, right = socket.socketpair()
    with left, right:
        threading.Timer(0.002, right.sendall, args=(b":1\r\n",)).start()
        buffer = bytearray(64)
        assert recv_polling(left, buffer, 2.0) == 4


def test_no_reply_within_the_budget_hands_back_to_the_caller() -> None:
    left, right = socket.socketpair()
    with left, right:
        start = time.perf_counter()
        assert recv_polling(left, bytearray(64), 0.003) is None
        assert time.perf_counter() - start >= 0.003
        right.sendall(b"+late\r\n")
        assert left.recv(64) == b"+late\r\n"  # the socket is still in blocking mode


def test_a_closed_peer_reads_as_zero_bytes() -> None:
    left, right = socket.socketpair()
    with left:
        right.close()
        assert recv_polling(left, bytearray(64), 0.5) == 0


def test_a_socket_with_a_timeout_is_not_polled() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.settimeout(5.0)
        right.sendall(b"+OK\r\n")
        assert recv_polling(left, bytearray(64), 0.5) is None  # the caller's own read takes it
        assert left.recv(64) == b"+OK\r\n"


def test_between_two_reads_the_poll_yields_its_cpu(monkeypatch) -> None:
    yields = {"n": 0}

    def counted() -> None:
        yields["n"] += 1

    monkeypatch.setattr(spinwait, "_sched_yield", counted)
    left, right = socket.socketpair()
    with left, right:
        # 50 ms, not 2: a thread descheduled past a 2 ms budget gave up before its first yield
        assert recv_polling(left, bytearray(64), 0.05) is None
        assert yields["n"] > 0
        right.sendall(b"+OK\r\n")
        time.sleep(0.01)
        before = yields["n"]
        assert recv_polling(left, bytearray(64), 0.5) == 5
        assert yields["n"] == before  # a reply already there is read without yielding


def test_it_polls_with_exactly_the_idle_cpus_it_asks_for_and_one_thread_a_cpu(files: tuple[Path, Path]) -> None:
    """At least POLL_WHEN_IDLE_CPUS idle, and no more threads ready than CPUs (the caller
    counts as one): both bounds are inclusive."""
    stat, cpus, start = _two_cpus(files)
    _loadavg(files[1], running=2)
    _stat(stat, user=1007, idle=1003)  # 3 idle ticks of 10 on 2 CPUs
    assert cpus.spare(start + 0.11) == POLL_WHEN_IDLE_CPUS
    assert cpus.poll_now(start + 0.12)


def test_a_stat_file_that_stops_reading_well_reads_as_busy(files: tuple[Path, Path]) -> None:
    stat, cpus, start = _two_cpus(files)
    _stat(stat, user=1000, idle=1020)
    assert cpus.poll_now(start + 0.11)
    stat.write_text("garbage\n")
    assert not cpus.poll_now(start + 0.22)


def test_a_first_line_other_than_the_cpu_total_reads_as_busy(tmp_path: Path) -> None:
    stat, loadavg = tmp_path / "stat", tmp_path / "loadavg"
    stat.write_text("intr 1000 0 0 1000 0 0 0 0\n")
    _loadavg(loadavg, running=1)
    cpus = IdleCpus(str(stat), str(loadavg), window=0.1, cpus=2)
    stat.write_text("intr 1000 0 0 1020 0 0 0 0\n")  # as if 20 idle ticks of 20
    assert not cpus.poll_now(cpus._at + 0.11)


def test_the_time_spent_polling_is_counted_for_the_machine() -> None:
    machine = spinwait.machine()
    left, right = socket.socketpair()
    with left, right:
        before = machine.polled
        assert recv_polling(left, bytearray(64), 0.002) is None
        assert machine.polled > before
