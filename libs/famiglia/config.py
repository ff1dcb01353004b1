"""Settings from the environment, one place for every address, URL and secret.

Every default is the embedded stack's; every value is overridable by an
environment variable (FAMIGLIA_*), so containers and Kubernetes configure by env.
"""

from __future__ import annotations

import math
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from famiglia.auth import TokenSigner

DEFAULT_PORTS = {
    "command": 50051,
    "matchmaking": 50052,
    "replay": 50053,
    "projection": 50054,
    "bots": 50055,
}


def project_var_dir() -> Path:
    """Where the embedded stack keeps its data (FAMIGLIA_VAR_DIR): by default the checkout's
    `var/` when famiglia runs from one (whatever the working directory: the CLI must find the
    stack `make up` started, and its secret), else ./var."""
    configured = os.environ.get("FAMIGLIA_VAR_DIR")
    if configured:
        return Path(configured).resolve()
    root = Path(__file__).resolve().parents[2]
    if (root / "Makefile").is_file() and (root / "libs" / "famiglia").is_dir():
        return root / "var"
    return Path("var").resolve()


def _addr(service: str) -> str:
    env = os.environ.get(f"FAMIGLIA_{service.upper()}_ADDR")
    return env or f"localhost:{DEFAULT_PORTS[service]}"


#: Secrets published in this repository (docker-compose.yml, deploy/k8s): whoever reads them
#: could mint any token, operator tokens included, so a deployment that kept one is stopped.
PLACEHOLDER_SECRETS = frozenset({"change-me"})


def _secret() -> str:
    """The HMAC secret for tokens: FAMIGLIA_SECRET, or one generated once and kept under var/.
    Read without the whitespace around it, as var/secret is (a key kept in a file comes with its
    newline); blank, as for every setting, is the default: the kept one."""
    env = os.environ.get("FAMIGLIA_SECRET", "").strip()
    if env:
        if env.lower() in PLACEHOLDER_SECRETS:
            raise SystemExit("FAMIGLIA_SECRET is the placeholder the shipped manifests carry: set it to a "
                             "long random string (e.g. `openssl rand -hex 32`)")
        return env
    path = project_var_dir() / "secret"
    if path.exists():
        kept = path.read_text().strip()
        if not kept:  # a key anyone could guess: never signed with, nor replaced behind the operator's back
            raise SystemExit(f"{path} holds no secret: delete it (a new one is made at the next start, and "
                             "tokens already given out stop working) or set FAMIGLIA_SECRET")
        return kept
    path.parent.mkdir(parents=True, exist_ok=True)
    value = secrets.token_hex(32)
    # A temporary file of this process's own, private from its creation and on disk before it
    # is linked in: the link makes var/secret that very file, so a shared name would let another
    # starter truncate the kept secret (and, killed then, leave it empty for good).
    tmp = path.with_name(f".{path.name}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        try:
            data = value.encode()
            while data:
                data = data[os.write(fd, data):]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)  # first writer wins when several processes start at once
        except FileExistsError:
            pass
    finally:
        tmp.unlink(missing_ok=True)
    return path.read_text().strip()


def _accepted_secret() -> str:
    """FAMIGLIA_SECRET_ACCEPTED: the other secret of a rollover, whose tokens are read (operator
    tokens excepted) and which signs none alone (docs/operations.md, "Rotating the secret");
    blank: none."""
    value = _text("FAMIGLIA_SECRET_ACCEPTED")
    if value.lower() in PLACEHOLDER_SECRETS:
        raise SystemExit("FAMIGLIA_SECRET_ACCEPTED is the placeholder the shipped manifests carry: "
                         "a token signed with it could be minted by anyone")
    return value


@dataclass(frozen=True)
class Settings:
    redis_url: str = "redis://127.0.0.1:6390/0"
    database_url: str = ""
    secret: str = field(default="", repr=False)
    command_addr: str = "localhost:50051"
    matchmaking_addr: str = "localhost:50052"
    replay_addr: str = "localhost:50053"
    projection_addr: str = "localhost:50054"
    bots_addr: str = "localhost:50055"
    partitions: int = 16
    grpc_workers: int = 64
    log_level: str = "info"
    accepted_secret: str = field(default="", repr=False)
    """A second secret whose tokens are still read (FAMIGLIA_SECRET_ACCEPTED): a rollover's."""

    def signer(self) -> TokenSigner:
        """The tokens' signer: signs with `secret` (operator tokens with `accepted_secret` too),
        reads tokens of `secret` and `accepted_secret` (operator tokens of `secret` only)."""
        from famiglia.auth import TokenSigner

        return TokenSigner(self.secret, [self.accepted_secret] if self.accepted_secret else [])

    @classmethod
    def from_env(cls) -> Settings:
        var = project_var_dir()
        return cls(
            # the embedded stack's Redis (on FAMIGLIA_REDIS_PORT when `make up` was given one);
            # blank, as every setting, is the default (a blank port was Redis's own 6379)
            redis_url=_redis_url(_text("FAMIGLIA_REDIS_URL")
                                 or f"redis://127.0.0.1:{_text('FAMIGLIA_REDIS_PORT') or '6390'}/0"),
            # blank is no read models, unlike the other settings (docs/projection.md)
            database_url=_database_url(os.environ.get("FAMIGLIA_DATABASE_URL", f"sqlite:///{var / 'famiglia.db'}")),
            secret=_secret(),
            command_addr=_addr("command"),
            matchmaking_addr=_addr("matchmaking"),
            replay_addr=_addr("replay"),
            projection_addr=_addr("projection"),
            bots_addr=_addr("bots"),
            partitions=whole("FAMIGLIA_PARTITIONS", 16),
            grpc_workers=whole("FAMIGLIA_GRPC_WORKERS", 64),
            log_level=os.environ.get("FAMIGLIA_LOG_LEVEL", "").strip() or "info",
            accepted_secret=_accepted_secret(),
        )


DATABASES = ("sqlite", "postgresql", "postgres")
"""The read models' databases (famiglia.readmodels.db), as a URL's scheme names them (`+driver` aside)."""


DATABASE_TIMEOUT_S = 5.0
"""How long a PostgreSQL client waits on a server that does not answer (FAMIGLIA_DATABASE_TIMEOUT_S)."""


def database_timeout_s(env: Mapping[str, str] | None = None) -> float:
    """FAMIGLIA_DATABASE_TIMEOUT_S: the seconds within which a connection to the read models'
    PostgreSQL gives up on a server that stops answering (famiglia.readmodels.db.postgres_timeouts);
    a number more than 0, else the process stops naming it."""
    return number("FAMIGLIA_DATABASE_TIMEOUT_S", DATABASE_TIMEOUT_S, env=env, above=True)


def _redis_url(url: str) -> str:
    """FAMIGLIA_REDIS_URL as redis-py will read it: one it cannot is refused at start in a line
    naming it (without its password), not by a traceback at the first connection."""
    from redis.connection import parse_url

    try:
        parse_url(url)
    except ValueError as exc:
        raise SystemExit(f"FAMIGLIA_REDIS_URL={shown_url(url)!r} is not a Redis URL: {exc}") from None
    return url


def _database_url(url: str) -> str:
    """FAMIGLIA_DATABASE_URL: blank (no read models), or a URL of a database the read models know.
    Checked by its scheme alone, without SQLAlchemy, which the command service never loads."""
    url = url.strip()
    scheme, sep, _ = url.partition("://")
    if url and (not sep or scheme.partition("+")[0].lower() not in DATABASES):
        raise SystemExit(f"FAMIGLIA_DATABASE_URL={shown_url(url)!r} is not a URL of SQLite (sqlite:///PATH) or "
                         "PostgreSQL (postgresql://USER@HOST/DB), nor blank (no read models)")
    return url


def _text(name: str) -> str:
    """A text setting without the whitespace around it ("" when unset or blank)."""
    return os.environ.get(name, "").strip()


def whole(name: str, default: int, low: int = 1, env: Mapping[str, str] | None = None) -> int:
    """A whole-number setting of at least `low` (blank: the default); anything else stops the
    process naming it."""
    text = (os.environ if env is None else env).get(name, "")
    if text.strip() == "":
        return default
    try:
        value = int(text)
    except ValueError:
        value = low - 1
    if value < low:
        raise SystemExit(f"{name}={text!r} is not a whole number of at least {low}")
    return value


def number(name: str, default: float, low: float = 0.0, env: Mapping[str, str] | None = None,
           *, above: bool = False, high: float = math.inf, unit: str = "") -> float:
    """A finite number setting of at least `low` (more than `low` when `above`) and at most `high`,
    or the process stops naming it and its range (in `unit`s, when given): a negative timeout or
    "nan" would otherwise be taken and misbehave later."""
    text = (os.environ if env is None else env).get(name, "")
    if text.strip() == "":
        return default
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value < low or (above and value == low) or value > high:
        of = f"of {unit} " if unit else ""
        if math.isfinite(high):
            bound = f"{of}from {low:g} to {high:g}"
        else:
            bound = f"{of}more than {low:g}" if above else f"{of}at least {low:g}"
        raise SystemExit(f"{name}={text!r} is not a number {bound}")
    return value


_YES, _NO = ("1", "true", "yes", "on"), ("0", "false", "no", "off")


def flag(name: str, default: bool, env: Mapping[str, str] | None = None) -> bool:
    """An on/off setting (1/true/yes/on, 0/false/no/off); a typo stops the process naming it
    rather than quietly meaning off."""
    text = (os.environ if env is None else env).get(name, "")
    word = text.strip().lower()
    if word == "":
        return default
    if word not in _YES + _NO:
        raise SystemExit(f"{name}={text!r} is not one of {'/'.join(_YES)} or {'/'.join(_NO)}")
    return word in _YES


def choice(name: str, default: str, choices: tuple[str, ...], env: Mapping[str, str] | None = None) -> str:
    """One of `choices` (blank: the default), or the process stops naming the setting."""
    text = (os.environ if env is None else env).get(name, "").strip()
    if text == "":
        return default
    if text not in choices:
        raise SystemExit(f"{name}={text!r} is not one of {', '.join(choices)}")
    return text


def shown_url(url: str) -> str:
    """A connection URL as a log line may show it: without its password (`redis://:***@host/0`),
    in the user part or in the query string (`?password=`, which redis-py reads too: a unix
    socket URL has nowhere else to carry it)."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    if "@" in rest:
        userinfo, _, rest = rest.rpartition("@")
        user, colon, _password = userinfo.partition(":")
        scheme = f"{scheme}://{user}{':***' if colon else ''}@"
    else:
        scheme += "://"
    where, question, query = rest.partition("?")
    if question:
        query = "&".join(f"{part.partition('=')[0]}=***" if part.partition("=")[0].lower() == "password" else part
                         for part in query.split("&"))
    return f"{scheme}{where}{question}{query}"


def listen_address(addr: str, name: str = "") -> str:
    """A client address (localhost:50051) as a server bind address ([::]:50051 unless given),
    without the scheme a client dials it by (`grpcs://`: TLS, famiglia.grpcutil.tls; port 443
    unless given, as clients dial it). Port 0 is the kernel's pick, which the start line names.
    One that is no HOST:PORT stops the service with a line naming its setting, `name`: gRPC would
    refuse it in a traceback naming neither, or bind another port than asked (99999)."""
    given = addr
    tls = addr.startswith("grpcs://")
    for scheme in ("grpcs://", "grpc://"):
        if addr.startswith(scheme):
            addr = addr.removeprefix(scheme).rstrip("/")  # as a client dials it (tls.dial_target)
    host, colon, port = addr.rpartition(":")
    if tls and (not colon or not port.isdigit()):  # no port (an IPv6 [::1] ends with "]")
        host, colon, port = addr, ":", "443"
    if not colon or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise SystemExit(f"{name or 'the address'}={given!r} is not HOST:PORT with a port of 0-65535")
    if host in ("localhost", "127.0.0.1"):
        return f"127.0.0.1:{port}"
    return f"{host}:{port}"
