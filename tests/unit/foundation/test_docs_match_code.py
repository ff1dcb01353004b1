"""README.md, docs/*.md, the Makefile and the deployment files say what the code does.

A newcomer, an operator and a client developer follow them literally: a setting the code
reads that no page names, a page naming a setting nothing reads, a `make` target that does
not exist, a link to a missing file or section, a deployment that runs a module that is not
there or sets a variable nothing reads — each was once true of this repository or is an easy
drift. docs/performance*.md are a lab notebook of measurements and are not held to this.
"""

from __future__ import annotations

import re
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
    files = [*(ROOT / "libs").rglob("*.py"), *(ROOT / "services").rglob("*.py")]
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
