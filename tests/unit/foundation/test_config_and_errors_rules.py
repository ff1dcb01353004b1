"""Config parsing and error mapping: rules a mutation of the code once changed without any
other test noticing."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import grpc
import pytest
import structlog
from google.protobuf import any_pb2
from google.rpc import code_pb2, error_details_pb2, status_pb2

from famiglia.config import Settings, listen_address, project_var_dir
from famiglia.grpcutil.errors import MAX_MESSAGE, FailedPrecondition, NotFound, error_code, to_status
from famiglia.grpcutil.server import rpc

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture()
def env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> pytest.MonkeyPatch:
    for name in list(os.environ):
        if name.startswith("FAMIGLIA_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("FAMIGLIA_VAR_DIR", str(tmp_path / "var"))
    return monkeypatch


# -- config --------------------------------------------------------------------------------
def test_an_empty_var_dir_means_the_default_not_the_working_directory(env, tmp_path: Path) -> None:
    """Fails if `if configured is not None`: FAMIGLIA_VAR_DIR= (set but empty, as compose files
    write it) would put var/ — and the secret — in whatever directory the process runs in."""
    env.setenv("FAMIGLIA_VAR_DIR", "")
    env.chdir(tmp_path)
    assert project_var_dir() == ROOT / "var"


def test_the_default_var_dir_is_the_checkouts_from_any_directory(env, tmp_path: Path) -> None:
    """The CLI finds the stack `make up` started from any working directory."""
    env.delenv("FAMIGLIA_VAR_DIR")
    env.chdir(tmp_path)
    assert project_var_dir() == ROOT / "var"


def test_service_addresses_come_from_the_environment(env) -> None:
    """FAMIGLIA_<SERVICE>_ADDR overrides the default address."""
    env.setenv("FAMIGLIA_SECRET", "s")
    env.setenv("FAMIGLIA_COMMAND_ADDR", "command:6000")
    env.setenv("FAMIGLIA_BOTS_ADDR", "bots:6005")
    s = Settings.from_env()
    assert (s.command_addr, s.bots_addr, s.replay_addr) == ("command:6000", "bots:6005", "localhost:50053")


def test_an_empty_secret_is_not_used_as_the_key(env, tmp_path: Path) -> None:
    """Fails if `if env is not None`: FAMIGLIA_SECRET= would sign every token with the empty key."""
    env.setenv("FAMIGLIA_SECRET", "")
    secret = Settings.from_env().secret
    assert len(secret) == 64 and secret == (tmp_path / "var" / "secret").read_text().strip()


@pytest.mark.parametrize("blank", [" ", "\n", " \t \r\n"])
def test_a_blank_secret_is_not_used_as_the_key_either(env, tmp_path: Path, blank: str) -> None:
    """A blank value means the default, for every setting (README, Configuration): here the
    generated var/secret. FAMIGLIA_SECRET=" " (which passes compose's `${FAMIGLIA_SECRET:?}`)
    was taken as the key, so anyone could mint any token, operator tokens included."""
    env.setenv("FAMIGLIA_SECRET", blank)
    secret = Settings.from_env().secret
    assert len(secret) == 64 and secret == (tmp_path / "var" / "secret").read_text().strip()


def test_a_secret_is_read_without_the_whitespace_around_it(env) -> None:
    """As var/secret is: a key kept in a file reaches the variable with its newline (`kubectl
    create secret --from-file`, `$(cat key)` in one place and not in another), and a service
    keyed with "KEY\\n" refused every token the CLI or another service minted with "KEY"."""
    env.setenv("FAMIGLIA_SECRET", "  0123456789abcdef\n")
    assert Settings.from_env().secret == "0123456789abcdef"


@pytest.mark.parametrize("placeholder", ["change-me", " change-me ", "CHANGE-ME"])
def test_the_placeholder_secret_of_the_shipped_manifests_stops_the_service(env, placeholder: str) -> None:
    """docker-compose.yml and deploy/k8s ship FAMIGLIA_SECRET=change-me: a deployment that kept it
    signs every token with a key anyone can read in this repository, so anyone could mint any
    seat token, player token or operator token (ImportMatch). It stops the service, naming the variable."""
    env.setenv("FAMIGLIA_SECRET", placeholder)
    with pytest.raises(SystemExit, match="FAMIGLIA_SECRET"):
        Settings.from_env()


def test_a_rollovers_accepted_secret_reaches_the_services_signer(env) -> None:
    """FAMIGLIA_SECRET_ACCEPTED (docs/operations.md, "Rotating the secret"): the signer every
    service reads tokens with (`Settings.signer`) reads the old secret's tokens and signs with
    the new; unset, only the secret's; the manifests' placeholder stops the service."""
    from famiglia.auth import InvalidToken, TokenSigner

    old_token = TokenSigner("old-secret-0123").seat_token("m1", 1)
    env.setenv("FAMIGLIA_SECRET", "new-secret-0123")
    with pytest.raises(InvalidToken):
        Settings.from_env().signer().read_seat(old_token)
    env.setenv("FAMIGLIA_SECRET_ACCEPTED", " old-secret-0123\n")
    settings = Settings.from_env()
    assert settings.signer().read_seat(old_token).seat == 1
    assert TokenSigner("new-secret-0123").read_seat(settings.signer().seat_token("m1", 0)).seat == 0
    assert "old-secret" not in repr(settings)
    env.setenv("FAMIGLIA_SECRET_ACCEPTED", "change-me")
    with pytest.raises(SystemExit, match="FAMIGLIA_SECRET_ACCEPTED"):
        Settings.from_env()


def test_the_clis_operator_tokens_are_read_on_either_side_of_a_rollovers_roll(env, monkeypatch) -> None:
    """A service takes an operator token by its own secret alone (docs/operations.md, "Rotating
    the secret"): `famiglia match cancel` from a shell with both secrets must reach a replica
    restarted with the new one and one not yet restarted alike."""
    import argparse
    from types import SimpleNamespace

    from famiglia.auth import TokenSigner
    from famiglia.cli import match as cli_match

    sent: list[str] = []

    class Game:
        def __init__(self, _address: str) -> None: ...

        def cancel_match(self, _match_id: str, _reason: str, *, token: str, request_id: str) -> SimpleNamespace:
            sent.append(token)
            return SimpleNamespace(duplicate=False, version=9)

        def close(self) -> None: ...

    monkeypatch.setattr(cli_match, "GameClient", Game)
    env.setenv("FAMIGLIA_SECRET", "new-secret-0123")
    env.setenv("FAMIGLIA_SECRET_ACCEPTED", "old-secret-0123")
    assert cli_match.cmd_cancel(argparse.Namespace(match_id="m1", reason="stuck", request_id="", address="x:1")) == 0
    for replica in (TokenSigner("new-secret-0123", ["old-secret-0123"]), TokenSigner("old-secret-0123", ["new-secret-0123"])):
        assert replica.read_operator(sent[0]) == "cli"


def test_compose_hands_a_rollovers_accepted_secret_to_every_service() -> None:
    """docs/operations.md, "Rotating the secret", says to put FAMIGLIA_SECRET_ACCEPTED in compose's
    `.env`: but `.env` only fills in the compose file, and its services' environment named
    FAMIGLIA_SECRET alone, so no container read the old secret's tokens and step 2 refused
    every seat and player token handed out before it."""
    from tests.unit.foundation.test_docs_match_code import _compose_environments

    environments = _compose_environments()
    assert {"command", "matchmaking", "replay", "bots", "bots-worker"} <= set(environments)
    for name, env in environments.items():
        assert env.get("FAMIGLIA_SECRET_ACCEPTED") == "${FAMIGLIA_SECRET_ACCEPTED:-}", name


def test_a_kept_secret_is_read_without_its_newline(env, tmp_path: Path) -> None:
    """A var/secret written by hand (`echo KEY > var/secret`) is the key, not KEY + newline."""
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "secret").write_text("abc123\n")
    assert Settings.from_env().secret == "abc123"


@pytest.mark.parametrize("kept", ["", "\n", "  \t\n"])
def test_a_kept_secret_file_with_no_secret_stops_the_service_with_one_line(env, tmp_path: Path, kept: str) -> None:
    """A var/secret emptied by hand (or a disk that lost it) was the empty key: TokenSigner then
    failed every service with a bare ValueError. It names the file and what to do."""
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "secret").write_text(kept)
    with pytest.raises(SystemExit, match="holds no secret"):
        Settings.from_env()
    assert (tmp_path / "var" / "secret").read_text() == kept  # left for the operator to look at


def test_a_generated_secret_is_private_and_leaves_no_temp_file(env, tmp_path: Path) -> None:
    """The secret file is private (not 0644), and no secret.tmp, a second copy of the key, is left behind."""
    Settings.from_env()
    var = tmp_path / "var"
    assert stat.S_IMODE((var / "secret").stat().st_mode) == 0o600
    assert sorted(p.name for p in var.iterdir()) == ["secret"]


def test_the_redis_port_reaches_the_default_url_and_the_database_is_under_var(env, tmp_path: Path) -> None:
    """FAMIGLIA_REDIS_PORT is heeded, and the default database is not relative to the working directory."""
    env.setenv("FAMIGLIA_SECRET", "s")
    env.setenv("FAMIGLIA_REDIS_PORT", "7123")
    s = Settings.from_env()
    assert s.redis_url == "redis://127.0.0.1:7123/0"
    assert s.database_url == f"sqlite:///{tmp_path / 'var' / 'famiglia.db'}"


def test_a_local_address_binds_the_loopback_only() -> None:
    """The embedded stack's default addresses listen on 127.0.0.1, not on every interface."""
    assert listen_address("localhost:50051") == "127.0.0.1:50051"
    assert listen_address("127.0.0.1:50052") == "127.0.0.1:50052"
    assert listen_address("0.0.0.0:50053") == "0.0.0.0:50053"


def test_a_listen_address_is_host_and_port_or_stops_the_service_naming_its_setting() -> None:
    """A TLS address binds the port clients dial (443 unless given); port 0 is the kernel's
    pick; anything else is refused in a line naming the setting, not by gRPC's traceback."""
    assert listen_address("grpcs://localhost") == "127.0.0.1:443"
    assert listen_address("grpcs://[::1]") == "[::1]:443"
    assert listen_address("grpcs://0.0.0.0:8443/") == "0.0.0.0:8443"
    assert listen_address("grpc://command:50051") == "command:50051"
    assert listen_address("127.0.0.1:0") == "127.0.0.1:0"
    for bad in ("localhost:abc", "127.0.0.1:99999", "command", "localhost:", "localhost:５０"):
        with pytest.raises(SystemExit) as stopped:
            listen_address(bad, "FAMIGLIA_REPLAY_ADDR")
        assert str(stopped.value).startswith(f"FAMIGLIA_REPLAY_ADDR={bad!r} is not HOST:PORT"), stopped.value


def test_a_port_below_1024_a_user_may_not_bind_is_said_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """grpcs://HOST alone binds 443 (f46a74b), and the image runs as a user (deploy/Dockerfile):
    a port it may not take was told as one another process holds, or a host not this machine's."""
    from famiglia.grpcutil.lifecycle import exit_unbound
    from famiglia.grpcutil.server import BindError

    monkeypatch.setattr(os, "geteuid", lambda: 10001)
    with pytest.raises(SystemExit) as stopped, exit_unbound("FAMIGLIA_COMMAND_ADDR", "grpcs://command"):
        raise BindError("command:443")
    assert str(stopped.value).startswith("FAMIGLIA_COMMAND_ADDR='grpcs://command': cannot listen there")
    assert "below 1024" in str(stopped.value), stopped.value
    with pytest.raises(SystemExit) as stopped, exit_unbound("FAMIGLIA_COMMAND_ADDR", "command:50051"):
        raise BindError("command:50051")
    assert "below 1024" not in str(stopped.value), stopped.value


# -- error mapping -------------------------------------------------------------------------
def _details(status: grpc.Status) -> status_pb2.Status:
    raw = dict(status.trailing_metadata)["grpc-status-details-bin"]
    return status_pb2.Status.FromString(raw)


def test_a_message_of_exactly_the_limit_is_kept_whole_and_a_longer_one_cut_to_it() -> None:
    """A message is cut only past MAX_MESSAGE bytes, and to MAX_MESSAGE."""
    code = "unknown_match"
    exact = "x" * (MAX_MESSAGE - len(code) - 2)
    assert to_status(NotFound(code, exact)).details == f"{code}: {exact}"
    cut = to_status(NotFound(code, "y" * 5000)).details
    assert len(cut.encode()) == MAX_MESSAGE and cut.endswith("…")


def test_a_message_quoting_a_long_non_ascii_id_stays_within_the_limit_in_bytes() -> None:
    """A message is cut by its UTF-8 bytes: 1,000 characters of "é" are 2,000 bytes, 6,000 as a
    percent-encoded header, and with the details' copy the trailers passed a client's 8 KB limit,
    which answered "Stream removed" instead of the refusal (found by the hostile soak)."""
    cut = to_status(NotFound("unknown_player", "no player '" + "é" * 5000 + "'")).details
    assert len(cut.encode()) <= MAX_MESSAGE and cut.startswith("unknown_player: no player 'é") and cut.endswith("…")
    assert len(_details(to_status(NotFound("x", "€" * 5000))).SerializeToString()) < 1200


def test_the_code_travels_in_the_trailing_metadata_and_in_error_info() -> None:
    """Fails if no `famiglia-code` trailer: README promises it to clients that do not parse status
    details; and ErrorInfo keeps its domain."""
    status = to_status(FailedPrecondition("GC-A03", "not your turn"))
    assert ("famiglia-code", "GC-A03") in tuple(status.trailing_metadata)
    detail = _details(status).details[0]
    info = error_details_pb2.ErrorInfo()
    assert detail.Unpack(info) and (info.reason, info.domain) == ("GC-A03", "famiglia")


class _Failed(grpc.RpcError):
    def __init__(self, proto: status_pb2.Status) -> None:
        self.proto = proto

    def code(self) -> grpc.StatusCode:
        return grpc.StatusCode.FAILED_PRECONDITION

    def details(self) -> str:
        return self.proto.message

    def trailing_metadata(self) -> tuple[tuple[str, Any], ...]:
        return (("grpc-status-details-bin", self.proto.SerializeToString()),)


def test_error_code_finds_error_info_behind_other_details() -> None:
    """A status whose first detail is another type (a proxy's DebugInfo) still has its code."""
    debug, info = any_pb2.Any(), any_pb2.Any()
    debug.Pack(error_details_pb2.DebugInfo(detail="via proxy"))
    info.Pack(error_details_pb2.ErrorInfo(reason="stale_version", domain="famiglia"))
    proto = status_pb2.Status(code=code_pb2.FAILED_PRECONDITION, message="m", details=[debug, info])
    assert error_code(_Failed(proto)) == "stale_version"


# -- the rpc wrapper's log line --------------------------------------------------------------
class _Aborted(Exception):
    pass


class _Call:
    def invocation_metadata(self) -> tuple[()]:
        return ()

    def abort_with_status(self, status: Any) -> None:
        raise _Aborted

    def abort(self, code: Any, details: str) -> None:
        raise _Aborted


class _Request:
    """A request with a match_id field, as _request_ids reads it."""

    class DESCRIPTOR:  # noqa: N801
        fields_by_name = {"match_id": None}

    def __init__(self, match_id: str) -> None:
        self.match_id = match_id


class _Service:
    @rpc
    def Refused(self, request: Any, context: Any) -> None:
        raise NotFound("unknown_match", "no match " + request.match_id)


def test_a_refusal_line_is_bounded_whatever_the_caller_sent() -> None:
    """Fails if reason not cut to 300, or if ids not cut to 200: a client's 4 MB match id would
    otherwise be written into the log twice per refused call."""
    with structlog.testing.capture_logs() as captured, pytest.raises(_Aborted):
        _Service().Refused(_Request("m" * 50_000), _Call())
    (line,) = [c for c in captured if c["event"] == "rpc_refused"]
    assert len(line["reason"]) <= 300 and len(line["match_id"]) <= 200


def test_a_starter_killed_while_writing_its_secret_leaves_the_kept_one_whole(env, tmp_path: Path) -> None:
    """Two processes start at once on a fresh var/ and both find no secret; the first links its
    copy in as var/secret, and the second is killed while it writes its own copy (opened, not yet
    written). Each must write a temporary file of its own: with one shared `secret.tmp` the
    second truncates the very file the first linked in, and var/secret stays empty for good —
    every token then signed with the empty key."""
    from famiglia import config

    real_link, real_exists, real_write_text, real_write = os.link, Path.exists, Path.write_text, os.write

    class Killed(BaseException):
        pass

    def opened_then_killed(self: Path, *_args: Any, **_kwargs: Any) -> int:
        with open(self, "w"):  # opened (truncated) for writing, then the process is gone
            raise Killed

    def killed(*_args: Any, **_kwargs: Any) -> int:
        raise Killed

    def second_starter() -> None:
        env.setattr(Path, "exists", lambda self: False if self.name == "secret" else real_exists(self))
        env.setattr(Path, "write_text", opened_then_killed)
        env.setattr(os, "write", killed)
        try:
            config._secret()
        except Killed:
            pass
        finally:
            env.setattr(Path, "exists", real_exists)
            env.setattr(Path, "write_text", real_write_text)
            env.setattr(os, "write", real_write)

    def link_then_race(src: Any, dst: Any, *args: Any, **kwargs: Any) -> None:
        real_link(src, dst, *args, **kwargs)
        env.setattr(os, "link", real_link)
        second_starter()  # found no secret before the first linked its copy in

    env.setattr(os, "link", link_then_race)
    first = config._secret()
    kept = (tmp_path / "var" / "secret").read_text().strip()
    assert len(kept) == 64, f"var/secret is {kept!r} after a starter was killed mid-write"
    assert first == kept == Settings.from_env().secret
