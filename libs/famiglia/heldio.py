"""Short writes that cannot wait, made without letting go of the GIL.

Python lets go of the GIL around every socket send and file write. On a busy server
another thread takes it at once, and the writer then waits for its turn to take it back:
one or two thread switches, each much dearer than a send of a few hundred bytes. Where a
write cannot block — a send with MSG_DONTWAIT, a write to a regular file or /dev/null — it
is made here through `ctypes.PyDLL`, whose calls keep the GIL. Anything else (a TLS or
other wrapped socket, a pipe or terminal that may fill up, a platform without the C
functions, an error) is left to the caller's usual Python call, which then does exactly
what it always did: the functions here only ever say how much they wrote.
"""

from __future__ import annotations

import ctypes
import os
import socket
import stat
from typing import IO, Any

_FLAGS = socket.MSG_DONTWAIT | getattr(socket, "MSG_NOSIGNAL", 0)


def _c_function(name: str, *argtypes: Any) -> Any:
    """The C library's `name`, called with the GIL held (None where it cannot be had)."""
    try:
        function = getattr(ctypes.PyDLL(None), name)
    except (OSError, AttributeError, TypeError):
        return None
    function.argtypes, function.restype = argtypes, ctypes.c_ssize_t
    return function


_send = _c_function("send", ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t, ctypes.c_int)
_write = _c_function("write", ctypes.c_int, ctypes.c_char_p, ctypes.c_size_t)


def send_held(sock: Any, data: bytes) -> int:
    """How many bytes of `data` went out on `sock` at once, without waiting and with the GIL
    held: 0 when none could (a full buffer, an error, not a plain socket); the caller sends
    the rest its usual way (`sock.sendall(data[sent:])`), which also raises any error."""
    if _send is None or type(sock) is not socket.socket:  # an SSLSocket must encrypt first
        return 0
    sent: int = _send(sock.fileno(), data, len(data), _FLAGS)
    return sent if sent > 0 else 0


def never_waiting_fd(file: IO[Any]) -> int | None:
    """The descriptor under `file` when a write to it cannot block — a regular file or the
    null device — else None (a pipe or a terminal can fill up or stop)."""
    if _write is None:
        return None
    try:
        fd = file.fileno()
        mode = os.fstat(fd)
    except (OSError, ValueError, AttributeError):  # io.UnsupportedOperation is an OSError
        return None
    if stat.S_ISREG(mode.st_mode):
        return fd
    try:
        null = os.stat(os.devnull)
    except OSError:
        return None
    return fd if stat.S_ISCHR(mode.st_mode) and mode.st_rdev == null.st_rdev else None


def write_held(fd: int, data: bytes) -> int:
    """How many bytes of `data` were written to `fd` (one `never_waiting_fd` gave) with the
    GIL held: 0 on an error; the caller writes the rest its usual way."""
    if _write is None:
        return 0
    written: int = _write(fd, data, len(data))
    return written if written > 0 else 0
