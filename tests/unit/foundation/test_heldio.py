"""Writes made with the GIL kept send or write what they say, never wait, and leave
everything they cannot do to the caller's usual call."""

from __future__ import annotations

import io
import os
import socket
import threading
from pathlib import Path

import pytest

from famiglia import heldio
from famiglia.heldio import never_waiting_fd, send_held, write_held


def test_a_send_on_a_plain_socket_goes_out_whole() -> None:
    left, right = socket.socketpair()
    with left, right:
        assert send_held(left, b"*1\r\n$4\r\nPING\r\n") == 14
        assert right.recv(100) == b"*1\r\n$4\r\nPING\r\n"


def test_a_full_send_buffer_is_not_waited_for_and_the_caller_sends_the_rest() -> None:
    left, right = socket.socketpair()
    with left, right:
        left.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
        chunk = b"x" * 65536
        sent_total, short = 0, None
        for _ in range(1000):  # the buffers fill long before: a send that waited would hang here
            sent = send_held(left, chunk)
            sent_total += sent
            if sent < len(chunk):
                short = sent
                break
        assert short is not None and short < len(chunk)
        # what a caller does with the rest: its usual sendall, while the peer reads
        rest = chunk[short:]
        received = bytearray()
        reader = threading.Thread(target=lambda: received.extend(_read_exactly(right, sent_total + len(rest))))
        reader.start()
        left.sendall(rest)
        reader.join(timeout=30)
        assert len(received) == sent_total + len(rest)


def _read_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        out += sock.recv(n - len(out))
    return bytes(out)


def test_wrapped_and_closed_sockets_are_left_to_the_caller() -> None:
    class Wrapped(socket.socket):  # an SSLSocket is such a subclass: its bytes must be encrypted first
        pass

    left, right = socket.socketpair()
    wrapped = Wrapped(fileno=os.dup(left.fileno()))
    with left, right, wrapped:
        assert send_held(wrapped, b"secret") == 0
    closed, other = socket.socketpair()
    other.close()
    closed.close()
    assert send_held(closed, b"x") == 0
    with pytest.raises(OSError):
        closed.sendall(b"x")  # the caller's usual call raises the error as it always did


def test_only_files_and_the_null_device_never_wait(tmp_path: Path) -> None:
    with open(tmp_path / "log", "w") as regular, open(os.devnull, "w") as null:
        assert never_waiting_fd(regular) == regular.fileno()
        assert never_waiting_fd(null) == null.fileno()
    read_end, write_end = os.pipe()
    with os.fdopen(read_end), os.fdopen(write_end, "w") as pipe:
        assert never_waiting_fd(pipe) is None  # a pipe fills up when nobody reads it
    assert never_waiting_fd(io.StringIO()) is None
    closed = open(tmp_path / "closed", "w")  # noqa: SIM115 - closed on purpose
    closed.close()
    assert never_waiting_fd(closed) is None


def test_a_held_write_writes_the_bytes_and_an_error_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "log"
    with open(path, "w") as file:
        fd = never_waiting_fd(file)
        assert fd is not None
        assert write_held(fd, b'{"event": "one"}\n') == 17
        file.write('{"event": "two"}\n')  # the usual path after it, same order
    assert path.read_text() == '{"event": "one"}\n{"event": "two"}\n'
    assert write_held(fd, b"after close") == 0


def test_without_the_c_functions_nothing_is_done_here(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(heldio, "_send", None)
    monkeypatch.setattr(heldio, "_write", None)
    left, right = socket.socketpair()
    with left, right, open(tmp_path / "log", "w") as file:
        assert send_held(left, b"x") == 0
        assert never_waiting_fd(file) is None
        assert write_held(file.fileno(), b"x") == 0


def test_a_terminal_is_not_the_null_device() -> None:
    """Only the null device among character devices: a terminal (here a pseudo-terminal
    nobody reads, or one stopped with ^S) can fill up and block a write made with the GIL."""
    pytest.importorskip("pty")
    controller, terminal = os.openpty()
    try:
        with os.fdopen(terminal, "w", closefd=False) as tty:
            assert never_waiting_fd(tty) is None
    finally:
        os.close(controller)
        os.close(terminal)
