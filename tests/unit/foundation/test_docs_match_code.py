"""README.md, docs/*.md, the Makefile and the deployment files say what the code does.

A newcomer, an operator and a client developer follow them literally: a setting the code
reads that no page names, a page naming a setting nothing reads, a `make` target that does
not exist, a link to a missing file or section, a deployment that runs a module that is not
there or sets a variable nothing reads, a `famiglia` command or option the CLI lacks, a grpcurl
call naming a method, field or proto file that is not there, a path outside the repository —
each was once true of this repository or is an easy drift. docs/performance*.md are a lab notebook of measurements and are not held to this.
"""

from __future__ import annotations

import argparse
import ast
import json
import re
from collections.abc import Iterator
from dataclasses import fields
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
README = ROOT / "README.md"
DOCS = [README, *sorted(p for p in (ROOT / "docs").glob("*.md") if not p.name.startswith("performance"))]
ALL_PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
DEPLOY = [ROOT / "docker-compose.yml", *sorted((ROOT / "deploy").rglob("*.yaml"))]

VAR = re.compile(r"\b((?:FAMIGLIA|OTEL)_[A-Z0-9_]*[A-Z0-9])\b")


def _code_files() -> list[Path]:
    """The services' code and the test suite's own set-up, whose settings a developer sets
    (FAMIGLIA_PG_BIN went unmentioned while only libs/ and services/ were read)."""
    files = [*(ROOT / "libs").rglob("*.py"), *(ROOT / "services").rglob("*.py"),
             *(ROOT / "tests/support").rglob("*.py"), ROOT / "tests/conftest.py", ROOT / "tests/profile.py"]
    # generated protobuf code names no settings
    return [p for p in files if not re.search(r"_pb2(_grpc)?\.py$", p.name)]


def _prefixed() -> set[str]:
    """Variables the code reads by building their names: a service's address, each field of
    the projection's RunnerConfig (FAMIGLIA_PROJECTION_<FIELD>) and the projection's cache."""
    from famiglia.config import DEFAULT_PORTS
    from services.projection.runner import RunnerConfig
    from services.projection.settings import PREFIX

    names = {f"FAMIGLIA_{service.upper()}_ADDR" for service in DEFAULT_PORTS}
    return names | {PREFIX + f.name.upper() for f in fields(RunnerConfig)} | {PREFIX + "CACHE"}


def _read_by_code() -> set[str]:
    """Every FAMIGLIA_*/OTEL_* variable the code names in a string literal (with the few it
    builds), i.e. what an operator may set."""
    names: set[str] = set()
    for path in _code_files():
        for literal in re.findall(r"\"([A-Z0-9_]+)\"", path.read_text()):
            if VAR.fullmatch(literal):
                names.add(literal)
    prefixes = {n for n in names if n.endswith("_")}
    return (names - prefixes) | _prefixed()


def _documented() -> set[str]:
    text = "\n".join(p.read_text() for p in DOCS)
    # `FAMIGLIA_MM_WINDOW_START` / `_GROWTH` / `_MAX`: the short forms name the same prefix
    for prefix, tails in re.findall(r"`((?:FAMIGLIA|OTEL)_[A-Z0-9_]+_)[A-Z0-9]+`((?:\s*/\s*`_[A-Z0-9_]+`)+)", text):
        text += " " + " ".join(prefix + t for t in re.findall(r"`_([A-Z0-9_]+)`", tails))
    return set(VAR.findall(text))


#: Read by the code, deliberately not an operator's setting.
NOT_SETTINGS = {
    "FAMIGLIA_PROFILE",  # the test suite's profile (quick / soak), set by `make soak`
}


def test_every_setting_the_code_reads_is_documented() -> None:
    missing = sorted(_read_by_code() - _documented() - NOT_SETTINGS)
    assert not missing, f"read by the code, named in neither README.md nor docs/*.md: {missing}"


def test_every_setting_the_docs_name_is_read_by_the_code() -> None:
    unread = sorted(_documented() - _read_by_code() - {"OTEL_PROPAGATORS"})  # read by opentelemetry itself
    assert not unread, f"named in README.md or docs/*.md, read by nothing: {unread}"


def test_the_readme_configuration_table_has_every_shared_setting() -> None:
    """famiglia.config is every service's settings: the README's table is where a newcomer looks."""
    table = README.read_text().split("## Configuration", 1)[1].split("\n## ", 1)[0]
    config = (ROOT / "libs/famiglia/config.py").read_text()
    shared = set(re.findall(r"\"(FAMIGLIA_[A-Z_]+)\"", config)) | {"FAMIGLIA_COMMAND_ADDR", "FAMIGLIA_BOTS_ADDR"}
    missing = sorted(n for n in shared if n not in table)
    assert not missing, f"famiglia.config reads {missing}, missing from README's Configuration table"


def test_every_setting_the_deployments_set_is_read_by_the_code() -> None:
    """A misspelt variable in docker-compose.yml or a manifest is silently ignored."""
    read = _read_by_code() | {"OTEL_EXPORTER_OTLP_ENDPOINT"}
    checked = 0
    for path in DEPLOY:
        named = set(VAR.findall(path.read_text()))
        checked += len(named)
        unread = sorted(named - read)
        assert not unread, f"{path.relative_to(ROOT)} sets {unread}, which no code reads"
    assert len(DEPLOY) > 1 and checked >= 10, (DEPLOY, checked)  # the files were found and read


def test_every_module_the_deployments_run_exists() -> None:
    commands = []
    for path in [*DEPLOY, ROOT / "deploy/Dockerfile"]:
        commands += [(path, m) for m in re.findall(r"\"python\",\s*\"-m\",\s*\"([\w.]+)\"", path.read_text())]
    assert len(commands) >= 12, commands
    for path, module in commands:
        base = ROOT / module.replace(".", "/")
        assert (base / "__main__.py").is_file() or base.with_suffix(".py").is_file(), \
            f"{path.relative_to(ROOT)} runs `python -m {module}`, which does not exist"


def test_the_deployments_listen_and_probe_on_each_service_default_port() -> None:
    """Readiness asks the whole server (""), which is NOT_SERVING while a dependency is away;
    liveness asks `LIVENESS`, which is not: on the same answer, a Redis outage restarted every
    replica in a loop (famiglia.grpcutil.readiness)."""
    from famiglia.config import DEFAULT_PORTS
    from famiglia.grpcutil.readiness import LIVENESS

    compose = (ROOT / "docker-compose.yml").read_text()
    k8s = (ROOT / "deploy/k8s/services.yaml").read_text()
    for service, port in DEFAULT_PORTS.items():
        var = f"FAMIGLIA_{service.upper()}_ADDR"
        assert f'{var}: "0.0.0.0:{port}"' in compose, (service, "docker-compose.yml")
        assert f"{var}: {service}:{port}" in compose, (service, "docker-compose.yml")
        assert f'{{ name: {var}, value: "0.0.0.0:{port}" }}' in k8s, (service, "services.yaml")
        assert f"readinessProbe: {{ grpc: {{ port: {port} }}" in k8s, (service, "services.yaml readiness")
        assert f"livenessProbe: {{ grpc: {{ port: {port}, service: {LIVENESS} }}" in k8s, \
            (service, "services.yaml liveness")
        assert f"port: {port}, targetPort: {port}" in k8s, (service, "services.yaml Service")
    assert k8s.count("livenessProbe:") == k8s.count(f"service: {LIVENESS} }}") == len(DEFAULT_PORTS)


def test_k8s_redis_and_postgres_are_ready_once_they_answer() -> None:
    """The same checks as docker-compose.yml's: PONG (not LOADING, on which redis-cli exits 0)
    and pg_isready over TCP."""
    stateful = (ROOT / "deploy/k8s/stateful.yaml").read_text()
    assert 'readinessProbe: { exec: { command: ["sh", "-c", "redis-cli ping | grep -q PONG"] }' in stateful
    assert 'readinessProbe: { exec: { command: ["pg_isready", "-h", "127.0.0.1", "-U", "famiglia", ' \
           '"-d", "famiglia"] }' in stateful


def test_k8s_redis_and_postgres_start_on_a_fresh_volume_as_their_images_mean() -> None:
    """PostgreSQL's initdb refuses a data directory that is not empty, and a fresh ext4 volume's
    root holds lost+found: PGDATA is a directory inside the volume. Redis's `command` replaced
    the image's entrypoint, which runs it as its `redis` user (compose keeps it): `args`."""
    stateful = (ROOT / "deploy/k8s/stateful.yaml").read_text()
    mount = re.search(r"\{ name: data, mountPath: (/var/lib/postgresql/data) \}", stateful)
    assert mount is not None, stateful
    pgdata = re.search(r"\{ name: PGDATA, value: (\S+) \}", stateful)
    assert pgdata is not None and pgdata[1].startswith(mount[1] + "/"), stateful
    assert 'args: ["redis-server", "/etc/redis/redis.conf"]' in stateful
    assert '"redis-server"' not in "".join(re.findall(r"command: \[.*\]", stateful))


def _compose_services(compose: str) -> dict[str, str]:
    """docker-compose.yml's `services:` entries by name, each its own block of lines (the file
    is read as text: no YAML parser is a dependency)."""
    body = compose.split("\nservices:\n", 1)[1].split("\nvolumes:", 1)[0]
    blocks = re.split(r"^  ([\w-]+):\n", body, flags=re.M)[1:]
    return dict(zip(blocks[::2], blocks[1::2], strict=True))


def test_compose_starts_the_services_once_redis_and_postgres_answer() -> None:
    """`depends_on: [redis, postgres]` waited only for their containers to run, not for Redis
    (reading its AOF back) or PostgreSQL (initialising) to answer: the services reaching them at
    start-up failed once and were restarted. Each has a healthcheck, and every famiglia service
    waits for `service_healthy` (through the shared `x-famiglia` block, which none overrides)."""
    compose = (ROOT / "docker-compose.yml").read_text()
    services = _compose_services(compose)
    assert {"redis", "postgres", "command", "projection", "bots-worker"} <= set(services), sorted(services)
    assert 'test: ["CMD-SHELL", "redis-cli ping | grep -q PONG"]' in services["redis"], services["redis"]
    assert re.search(r'test: \["CMD", "pg_isready", "-h", "127.0.0.1", "-U", "famiglia", "-d", "famiglia"\]',
                     services["postgres"]), services["postgres"]
    shared = compose.split("x-famiglia: &famiglia\n", 1)[1].split("\nservices:\n", 1)[0]
    for dependency in ("redis", "postgres"):
        assert re.search(rf"^    {dependency}: {{ condition: service_healthy }}$", shared, re.M), shared
    ours = {name: block for name, block in services.items() if "<<: *famiglia" in block}
    assert set(ours) == set(services) - {"redis", "postgres"}, sorted(ours)
    for name, block in ours.items():
        assert "depends_on" not in block, f"{name} overrides the shared depends_on"


def _flow_pairs(text: str) -> dict[str, str]:
    """The `NAME: value` pairs of a one-line YAML flow mapping (`{ <<: *env, NAME: "v" }`)."""
    return {k: v.strip().strip('"') for k, v in re.findall(r"\b([A-Z][A-Z0-9_]*): (\"[^\"]*\"|[^,}]+)", text)}


def _compose_environments() -> dict[str, dict[str, str]]:
    """Each famiglia service's environment in docker-compose.yml: the shared `&env` block with
    the service's own entries over it."""
    compose = (ROOT / "docker-compose.yml").read_text()
    shared: dict[str, str] = {}
    for line in compose.split("environment: &env\n", 1)[1].splitlines():
        entry = re.match(r"    ([A-Z][A-Z0-9_]*): (.*)$", line)
        if entry is None:
            break
        shared[entry[1]] = entry[2].strip('"')
    out = {}
    for name, block in _compose_services(compose).items():
        if "<<: *famiglia" in block:
            own = re.search(r"^    environment: \{ <<: \*env, (.*) \}$", block, re.M)
            out[name] = {**shared, **(_flow_pairs(own[1]) if own else {})}
    return out


def _k8s_containers() -> dict[str, str]:
    """deploy/k8s/services.yaml's containers (init containers too) by name, each its lines."""
    services = (ROOT / "deploy/k8s/services.yaml").read_text()
    out = {}
    for chunk in re.split(r"^        - name: ", services, flags=re.M)[1:]:
        name, _, rest = chunk.partition("\n")
        out[name] = re.match(r"(?: {10}.*\n)*", rest)[0]  # type: ignore[index]
    return out


def _k8s_environments() -> dict[str, dict[str, str]]:
    """Each famiglia container's environment: the ConfigMap and the Secret it takes (which must
    exist), then its own `env`."""
    shipped = (ROOT / "deploy/k8s/famiglia.yaml").read_text()
    config = shipped.split("name: famiglia-config,", 1)[1].split("\n---", 1)[0].split("\ndata:\n", 1)[1]
    shared = dict(re.findall(r"^  ([A-Z][A-Z0-9_]*): (.*)$", config, re.M))
    secret = _flow_pairs(shipped.split("name: famiglia-secret,", 1)[1].split("stringData:", 1)[1].splitlines()[0])
    out = {}
    for name, block in _k8s_containers().items():
        if "image: famiglia:latest" in block:
            assert "envFrom: [{ configMapRef: { name: famiglia-config } }, { secretRef: { name: famiglia-secret } }]" \
                in block, name
            out[name] = {**shared, **secret, **dict(re.findall(r'\{ name: (\w+), value: "([^"]*)" \}', block))}
    return out


def _deployed() -> list[object]:
    return [pytest.param(where, name, env, id=f"{where}:{name}")
            for where, found in (("docker-compose.yml", _compose_environments()), ("deploy/k8s", _k8s_environments()))
            for name, env in found.items()]


@pytest.mark.parametrize(("where", "name", "env"), _deployed())
def test_every_value_the_deployments_set_is_one_the_code_accepts(
        monkeypatch: pytest.MonkeyPatch, where: str, name: str, env: dict[str, str]) -> None:
    """Read by the services' own loaders: a value they refuse stops a replica at start (in a
    crash loop), one they misread (an address) makes it dial nothing. The production settings
    are all set: the secret (its shipped placeholder, refused on purpose, stands for the
    operator's; tests/unit/foundation/test_config_and_errors_rules.py), Redis, PostgreSQL
    through the psycopg driver the image installs, and every peer by a name the deployment has."""
    import os

    import redis
    from sqlalchemy.engine import make_url

    from famiglia.config import DEFAULT_PORTS, Settings
    from famiglia.grpcutil.tls import transport
    from famiglia.telemetry import exporters
    from services.bots.bootstrap import BotsSettings
    from services.matchmaking.settings import MatchmakingSettings
    from services.projection.settings import ProjectionSettings
    from services.replay.bootstrap import ReplaySettings

    for variable in list(os.environ):
        if variable.startswith(("FAMIGLIA_", "OTEL_")):
            monkeypatch.delenv(variable)
    assert {"FAMIGLIA_SECRET", "FAMIGLIA_REDIS_URL", "FAMIGLIA_DATABASE_URL"} <= set(env), (where, name)
    for variable, value in env.items():
        monkeypatch.setenv(variable, "an operator's own secret" if variable == "FAMIGLIA_SECRET" else value)
    settings = Settings.from_env()
    hosts = set(_compose_services((ROOT / "docker-compose.yml").read_text())) if where == "docker-compose.yml" \
        else set(re.findall(r"^kind: Service\nmetadata: \{ name: ([\w-]+),", "\n".join(
            (ROOT / "deploy/k8s" / f).read_text() for f in ("services.yaml", "stateful.yaml")), re.M))
    assert redis.ConnectionPool.from_url(settings.redis_url).connection_kwargs["host"] in hosts
    database = make_url(settings.database_url)
    assert (database.get_dialect().driver, database.host in hosts) == ("psycopg", True), settings.database_url
    for service, port in DEFAULT_PORTS.items():
        own = name == service
        assert getattr(settings, f"{service}_addr") == (f"0.0.0.0:{port}" if own else f"{service}:{port}"), service
        assert own or service in hosts, service
    BotsSettings.from_env(), MatchmakingSettings.from_env(), ProjectionSettings.from_env(), ReplaySettings.from_env()
    assert transport().tls is None  # plaintext inside, as the Ingress's backend-protocol "GRPC" speaks
    exporters("OTEL_TRACES_EXPORTER"), exporters("OTEL_METRICS_EXPORTER")


def test_a_bots_worker_pod_runs_the_workers_its_cpu_request_pays_for() -> None:
    """One Celery worker per core by default, but a container counts the node's cores (os.cpu_count),
    not its CPU request: on a 32-core node a bots-worker pod (500m, 1Gi) forked 32 workers and was
    killed for its memory, again and again."""
    workers = {n: e for n, e in _k8s_environments().items() if "services.bots.worker" in _k8s_containers()[n]}
    assert workers, sorted(_k8s_environments())
    for name, env in workers.items():
        assert env.get("FAMIGLIA_BOTS_CONCURRENCY") == "1", name


def _drain_seconds(service: str) -> float:
    """The longest a service's process takes to stop once signalled, read from its __main__: each
    `server.stop(grace=...)` and `join(timeout=...)`, a join in a loop once for every thread the
    module starts."""
    tree = ast.parse((ROOT / "services" / service / "__main__.py").read_text())
    threads = sum(1 for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "attr", "") == "Thread")
    looped = {id(n) for loop in ast.walk(tree) if isinstance(loop, ast.For) for n in ast.walk(loop)}
    total = 0.0
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "attr", "") in ("stop", "join"):
            for keyword in node.keywords:
                if keyword.arg in ("grace", "timeout") and isinstance(keyword.value, ast.Constant):
                    total += keyword.value.value * (threads if id(node) in looped else 1)
    return total


def test_each_deployment_lets_its_services_drain_before_it_kills_them() -> None:
    """A stop's SIGKILL comes after Kubernetes' terminationGracePeriodSeconds (30 s unless set,
    the preStop's wait included) or compose's stop_grace_period (10 s unless set, which cut the
    projection's 20 s short); the bots' workers end their task at hand (Celery's warm shutdown),
    which may run up to FAMIGLIA_BOTS_TASK_TIME_LIMIT."""
    from famiglia.config import DEFAULT_PORTS
    from services.bots.bootstrap import BotsSettings

    needs = {service: _drain_seconds(service) for service in DEFAULT_PORTS}
    assert needs["projection"] >= 20 and needs["bots"] >= 13, needs  # the stop code was read
    needs["bots.worker"] = BotsSettings().task_time_limit
    services = (ROOT / "deploy/k8s/services.yaml").read_text()
    for deployment in services.split("\n---\n"):
        run = re.search(r'command: \["python", "-m", "services\.([\w.]+)"\]', deployment)
        if "kind: Deployment" not in deployment or run is None:
            continue
        service = run[1]
        grace = re.search(r"terminationGracePeriodSeconds: (\d+)", deployment)
        pre_stop = re.search(r'preStop: \{ exec: \{ command: \["sleep", "(\d+)"\] \} \}', deployment)
        if service != "bots.worker":  # a gRPC server: the endpoints let it go before it stops listening
            assert pre_stop is not None, service
        waited = (int(pre_stop[1]) if pre_stop else 0) + needs.pop(service)
        assert waited < (int(grace[1]) if grace else 30), (service, waited)
    assert not needs, f"no Deployment runs {sorted(needs)}"
    compose = (ROOT / "docker-compose.yml").read_text()
    shared = re.search(r"^  stop_grace_period: (\d+)s$", compose.split("\nservices:\n", 1)[0], re.M)
    for name, block in _compose_services(compose).items():
        if "<<: *famiglia" in block:
            own = re.search(r"^    stop_grace_period: (\d+)s$", block, re.M) or shared
            service = re.search(r'command: \["python", "-m", "services\.([\w.]+)"\]', block)[1]  # type: ignore[index]
            need = BotsSettings().task_time_limit if service == "bots.worker" else _drain_seconds(service)
            assert need < (int(own[1]) if own else 10), (name, need)


def test_the_projection_migrates_before_kubernetes_probes_it() -> None:
    """The projection migrates its schema before its server listens: under the liveness probe
    (3 × 10 s) a long migration restarted the pod mid-way, and then again. An init container runs
    `migrate` (a subcommand it has) first, with the same environment."""
    from services.projection.__main__ import main

    containers = _k8s_containers()
    assert 'command: ["python", "-m", "services.projection", "migrate"]' in containers["migrate"]
    services = (ROOT / "deploy/k8s/services.yaml").read_text()
    projection = next(d for d in services.split("\n---\n") if "metadata: { name: projection," in d
                      and "kind: Deployment" in d)
    assert projection.index("initContainers:\n        - name: migrate\n") < projection.index("      containers:")
    with pytest.raises(SystemExit) as shown:
        main(["migrate", "--help"])
    assert shown.value.code == 0


def test_the_image_builds_from_the_repository_and_runs_as_no_root() -> None:
    """Every COPY source is in the repository and not left out of the build context; the image
    holds the generated protobuf modules (committed, not generated at build) and the
    projection's migrations; the context leaves out the local stack's secret and compose's."""
    dockerfile = (ROOT / "deploy/Dockerfile").read_text()
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert {"var", ".env", ".venv", ".git"} <= set(ignored), ignored
    copied = []
    for line in re.findall(r"^COPY (.+)$", dockerfile, re.M):
        *sources, _dest = line.split()
        for source in sources:
            assert (ROOT / source).exists() and source not in ignored, source
            copied.append(source)
    assert {"libs", "services", "pyproject.toml", "README.md"} <= set(copied), copied
    for proto in (ROOT / "protos").rglob("*.proto"):
        generated = ROOT / "libs" / proto.relative_to(ROOT / "protos").with_name(f"{proto.stem}_pb2.py")
        assert generated.is_file(), f"{generated.relative_to(ROOT)}: the image would lack {proto.name}'s module"
    assert any((ROOT / "services/projection/migrations/versions").glob("0001_*.py"))
    user = re.findall(r"^USER (\S+)$", dockerfile, re.M)
    assert user and user[-1] not in ("root", "0"), user
    assert dockerfile.rindex("USER ") < dockerfile.rindex("CMD ")


def _make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(), re.M))


def test_every_make_target_the_docs_name_exists() -> None:
    targets = _make_targets()
    checked: set[str] = set()
    for page in ALL_PAGES:
        named = set(re.findall(r"`make ([a-z][a-z-]*)", page.read_text()))
        named |= set(re.findall(r"\| `make ([a-z][a-z-]*)`", page.read_text()))
        assert named <= targets, f"{page.relative_to(ROOT)} names make {sorted(named - targets)}"
        checked |= named
    assert {"test", "run", "soak"} <= checked, checked  # the patterns still find what the README names


def test_the_readme_make_table_lists_every_documented_target() -> None:
    """`make help` prints the targets with a `## ` description; the README names each one."""
    makefile = (ROOT / "Makefile").read_text()
    described = set(re.findall(r"^([a-z][a-z-]*):.*## ", makefile, re.M))
    section = README.read_text().split("## Make targets", 1)[1].split("\n## ", 1)[0]
    missing = sorted(t for t in described if not re.search(rf"`{t}\b|make {t}\b", section))
    assert not missing, f"README's Make targets section does not name {missing}"


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors of a page's headings."""
    out = set()
    for line in page.read_text().splitlines():
        heading = re.match(r"#+\s+(.*)", line)
        if heading:
            slug = re.sub(r"[^\w\- ]", "", heading.group(1).strip().lower())
            out.add(slug.replace(" ", "-"))
    return out


@pytest.mark.parametrize("page", ALL_PAGES, ids=lambda p: p.name)
def test_every_relative_link_resolves(page: Path) -> None:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        dest = (page.parent / path) if path else page
        assert dest.exists(), f"{page.name}: link to {target}: no such file"
        if anchor and dest.suffix == ".md":
            assert anchor in _anchors(dest), f"{page.name}: link to {target}: no such heading"


def test_every_repository_path_the_docs_name_exists() -> None:
    """`libs/...`, `services/...`, `tests/...`, `tools/...`, `deploy/...`, `protos/...` in
    backquotes: a newcomer opens them."""
    pattern = re.compile(r"`((?:libs|services|tests|tools|deploy|protos|docs)/[\w./-]*)")
    checked = 0
    for page in DOCS:
        for path in pattern.findall(page.read_text()):
            assert (ROOT / path.rstrip(".")).exists(), f"{page.relative_to(ROOT)} names {path}: no such path"
            checked += 1
    assert checked >= 10, checked  # the pattern still finds the paths the docs name


def test_run_help_states_the_main_jobs_deadlines(capsys: pytest.CaptureFixture[str]) -> None:
    """`famiglia run --help` once promised "about half a minute" for a run whose matches may
    start for 60 s: it names the deadlines of famiglia.cli.tournament.SIZES."""
    from famiglia.cli.main import main
    from famiglia.cli.tournament import SIZES

    with pytest.raises(SystemExit):
        main(["run", "--help"])
    shown = " ".join(capsys.readouterr().out.split())
    assert f"no new match starts after {SIZES['quick'].deadline_seconds:g} s" in shown, shown
    assert f"normal (after {SIZES['normal'].deadline_seconds / 60:g} min)" in shown, shown
    assert not SIZES["long"].deadline_seconds


def test_the_compose_files_own_instructions_start_it() -> None:
    """docker-compose.yml requires FAMIGLIA_SECRET (`${FAMIGLIA_SECRET:?...}`: every `docker
    compose` command, `down` and `logs` too, stops without it), but its header still said just
    `docker compose up --build`. Its instructions name the secret and where it is kept (`.env`,
    which compose reads), and `.env` is git-ignored so the key is not committed with the code."""
    compose = (ROOT / "docker-compose.yml").read_text()
    header = "".join(line for line in compose.splitlines(keepends=True) if line.startswith("#"))
    assert "FAMIGLIA_SECRET:?" in compose
    assert "FAMIGLIA_SECRET" in header and ".env" in header, header
    assert ".env" in (ROOT / ".gitignore").read_text().split()


def _subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    return next((dict(a.choices) for a in parser._actions if isinstance(a, argparse._SubParsersAction)), {})


def _cli_examples() -> list[tuple[str, str]]:
    """(where, text) of every `famiglia ...` a reader may type: in backquotes or a code block of
    README.md and docs/*.md, and in the usage lines of each `--help` (the parsers' descriptions)."""
    from famiglia.cli.main import build_parser

    def helps(parser: argparse.ArgumentParser, name: str) -> Iterator[tuple[str, str]]:
        yield f"`{name} --help`", parser.description or ""
        for sub, child in _subcommands(parser).items():
            yield from helps(child, f"{name} {sub}")

    found = []
    for where, text in [*((p.name, p.read_text()) for p in ALL_PAGES), *helps(build_parser(), "famiglia")]:
        spans = [line for block in re.findall(r"```.*?```", text, flags=re.S) for line in block.splitlines()]
        spans += re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", text, flags=re.S))
        spans += [line for line in text.splitlines() if where.endswith("--help`")]  # indented usage lines
        found += [(where, m.group(1)) for s in spans if (m := re.match(r"\s*(?:\S*/)?famiglia ([a-z].*)", s))]
    return found


def test_every_famiglia_command_and_option_the_docs_name_exists() -> None:
    """A newcomer types what the pages show: `famiglia tournament run --round-robin --seats 3`,
    `famiglia replay events MATCH_ID [--token T]`, `famiglia up | down | status`. Each command
    (and its subcommand) is one of the CLI's, each `--option` one that command takes."""
    from famiglia.cli.main import build_parser

    root = build_parser()
    checked = 0
    for where, example in _cli_examples():
        words = re.sub(r"\s*\|\s*", "|", example).split()  # `up | down | status`: each of them
        for name in words[0].split("|"):
            commands = _subcommands(root)
            assert name in commands, f"{where}: `famiglia {example}`: no command {name!r}"
            chain, rest = [commands[name]], words[1:]
            inner = _subcommands(commands[name])
            if inner and rest and re.fullmatch(r"[a-z][a-z|-]*", rest[0]):
                for sub in rest[0].split("|"):
                    assert sub in inner, f"{where}: `famiglia {example}`: no command {name} {sub!r}"
                chain += [inner[sub] for sub in rest[0].split("|")]
                rest = rest[1:]
            options = {o for parser in chain for action in parser._actions for o in action.option_strings}
            for option in re.findall(r"(?:^|\s)\[?(--?[a-z][a-z-]*)", " ".join(rest)):
                assert option in options, f"{where}: `famiglia {example}`: {name} takes no {option}"
            checked += 1
    assert checked >= 40, checked  # the pages' and the --help texts' examples were all found


def test_the_options_make_run_is_shown_with_are_famiglia_runs() -> None:
    """`make run ARGS="--size normal"` hands ARGS to `famiglia run`."""
    from famiglia.cli.main import build_parser

    run = _subcommands(build_parser())["run"]
    options = {o for action in run._actions for o in action.option_strings}
    named = {o for page in ALL_PAGES for args in re.findall(r"make run ARGS=\"?([^\"`|)]*)", page.read_text())
             for o in re.findall(r"--[a-z][a-z-]*", args)}
    assert {"--size", "--keep-up"} <= named, named  # the pattern still finds the README's
    assert named <= options, f"`make run ARGS=...` names {sorted(named - options)}, which `famiglia run` lacks"


def _outside(page: Path, text: str) -> list[str]:
    """The `../` paths (in backquotes or a link) of a page's text that climb out of the repository."""
    paths = re.findall(r"[`(]((?:\.\./)+[\w.-][^`)\s]*)", text)
    return [p for p in paths if not (page.parent / p).resolve().is_relative_to(ROOT)]


def test_no_page_sends_a_newcomer_outside_the_repository() -> None:
    """README.md once pointed at `../shared/DESIGN.md`, a file beside one machine's checkout
    (which the link check finds there): a clone has nothing there."""
    assert _outside(README, "decisions: `../shared/DESIGN.md`") == ["../shared/DESIGN.md"]
    assert _outside(ROOT / "docs/x.md", "[the README](../README.md), `../libs/famiglia/`") == []
    for page in ALL_PAGES:
        outside = _outside(page, page.read_text())
        assert not outside, f"{page.relative_to(ROOT)} names {outside}, outside the repository"


def _grpcurl_calls() -> list[str]:
    """Each grpcurl command line of the README (a `\\` continues it on the next line), and each
    of its arguments in backquotes (`grpcurl ...`, `-import-path protos -proto ...`)."""
    text = re.sub(r"\\\n\s*", " ", README.read_text())
    lines = [line.strip() for block in re.findall(r"```.*?```", text, flags=re.S) for line in block.splitlines()]
    spans = re.findall(r"`([^`]+)`", re.sub(r"```.*?```", "", text, flags=re.S).replace("\n", " "))
    return [s for s in lines if s.startswith("grpcurl ")] + [s for s in spans if s.startswith("grpcurl ") or "-proto " in s]


def test_the_readmes_grpcurl_calls_name_real_methods_fields_and_proto_files() -> None:
    """grpcurl is not installed with famiglia, so its examples are checked against the protos:
    each `Service/Method` is served, each `-d` field is one of its request's, and each `-proto`
    file is under `protos/` (`-import-path protos`)."""
    import importlib

    from google.protobuf import descriptor_pool

    for module in ("grpc_health.v1.health_pb2", *(f"famiglia.v1.{p.stem}_pb2" for p in
                                                   (ROOT / "protos/famiglia/v1").glob("*_service.proto"))):
        importlib.import_module(module)  # registers its services in the default pool
    pool = descriptor_pool.Default()
    calls = _grpcurl_calls()
    methods = 0
    for call in calls:
        protos = re.findall(r"-proto (\S+)", call)
        for proto in protos:
            assert (ROOT / "protos" / proto).is_file(), f"`{call}`: no protos/{proto}"
        if "famiglia/v1/game_service.proto" in protos:  # its Anys are the game's messages
            assert any(re.fullmatch(r"famiglia/\w+/v1/\w+\.proto", p) for p in protos if "/v1/game" not in p), \
                f"`{call}`: grpcurl cannot show a View or send a Command without the game's proto"
        for service, method in re.findall(r"\b((?:famiglia|grpc)\.[\w.]+)/(\w+)", call):
            found = pool.FindServiceByName(service).methods_by_name.get(method)
            assert found is not None, f"`{call}`: {service} has no method {method}"
            data = re.search(r"-d '([^']*)'", call)
            unknown = set(json.loads(data.group(1)) if data else {}) - set(found.input_type.fields_by_name)
            assert not unknown, f"`{call}`: {found.input_type.full_name} has no field {sorted(unknown)}"
            methods += 1
    assert methods >= 4, calls  # the README's examples, the health check's included
