"""What the deployment files do with transport security (docs/architecture.md, "Transport
security"): plaintext never leaves the host or the cluster, and the Kubernetes Ingress
terminates TLS in front of exactly the services clients call, as gRPC."""

from __future__ import annotations

import re
from pathlib import Path

from famiglia.config import DEFAULT_PORTS

ROOT = Path(__file__).resolve().parents[3]

#: The gRPC services each famiglia service serves, the ones clients outside call.
PUBLIC = {
    "famiglia.v1.GameService": "command",
    "famiglia.v1.MatchmakingService": "matchmaking",
    "famiglia.v1.PlayerService": "matchmaking",
    "famiglia.v1.ReplayService": "replay",
    "famiglia.v1.QueryService": "projection",
    "famiglia.v1.TournamentService": "bots",
}


def test_compose_publishes_its_plaintext_ports_on_loopback_only() -> None:
    """`ports: ["50051:50051"]` published every port on all of the host's interfaces, so seat
    tokens crossed whatever network the host is on in plaintext, while the file said clients
    reach it on localhost."""
    compose = (ROOT / "docker-compose.yml").read_text()
    published = re.findall(r"^\s+ports: \[(.*)\]$", compose, re.M)
    assert len(published) == len(DEFAULT_PORTS), published
    for entry in published:
        for mapping in re.findall(r'"([^"]+)"', entry):
            assert mapping.startswith("127.0.0.1:"), f"docker-compose.yml publishes {mapping} beyond loopback"


def test_the_ingress_terminates_tls_for_each_public_service_as_grpc() -> None:
    ingress = (ROOT / "deploy/k8s/ingress.yaml").read_text()
    assert "kind: Ingress" in ingress and "namespace: famiglia" in ingress
    assert 'nginx.ingress.kubernetes.io/backend-protocol: "GRPC"' in ingress
    tls = re.search(r"^  tls:\n    - hosts: \[([\w.-]+)\]\n      secretName: ([\w-]+)$", ingress, re.M)
    assert tls is not None, ingress
    assert f"- host: {tls.group(1)}" in ingress  # the host it serves is the one its certificate names
    routes = {path: (name, int(port)) for path, name, port in re.findall(
        r"path: /([\w.]+), pathType: Prefix, backend: \{ service: \{ name: ([\w-]+), port: \{ number: (\d+) \}",
        ingress)}
    assert routes == {service: (name, DEFAULT_PORTS[name]) for service, name in PUBLIC.items()}, routes
    services = (ROOT / "deploy/k8s/services.yaml").read_text()
    for name in set(PUBLIC.values()):  # the Services it names exist, on those ports
        port = DEFAULT_PORTS[name]
        assert f"metadata: {{ name: {name}, namespace: famiglia }}\nspec:\n  selector: {{ app: {name} }}\n" \
               f"  ports: [{{ port: {port}, targetPort: {port}, name: grpc }}]" in services, name
    assert "grpc.health" not in ingress and "reflection" not in ingress.split("spec:", 1)[1]


def test_every_public_service_of_the_ingress_is_one_the_protos_define() -> None:
    """A path that names no service (a typo, a rename) would route nothing, silently."""
    from google.protobuf import descriptor_pool

    import famiglia.v1.game_service_pb2  # noqa: F401  (each registers its services)
    import famiglia.v1.matchmaking_service_pb2  # noqa: F401
    import famiglia.v1.query_service_pb2  # noqa: F401
    import famiglia.v1.replay_service_pb2  # noqa: F401
    import famiglia.v1.tournament_service_pb2  # noqa: F401

    for service in PUBLIC:
        assert descriptor_pool.Default().FindServiceByName(service).full_name == service


def test_the_way_to_encrypt_inside_the_cluster_names_the_ingress_change_it_takes() -> None:
    """Pods serving TLS themselves (FAMIGLIA_TLS_CERT, as services.yaml tells how) behind the
    Ingress as shipped, which speaks plaintext gRPC to them (`backend-protocol: "GRPC"`), answer
    it nothing: every public call fails. The instructions named every other change but that one."""
    services = (ROOT / "deploy/k8s/services.yaml").read_text()
    how = services.split("To encrypt inside the cluster too", 1)[1].split("\n---", 1)[0]
    assert "FAMIGLIA_TLS_CERT" in how and 'backend-protocol to "GRPCS"' in how, how
    ingress = (ROOT / "deploy/k8s/ingress.yaml").read_text()
    assert 'backend-protocol "GRPCS"' in ingress.split("apiVersion:", 1)[0]  # its own header says so
    architecture = (ROOT / "docs/architecture.md").read_text()
    native = architecture.split("**Native TLS in every server**", 1)[1].split("\n\n", 1)[0]
    assert '`backend-protocol: "GRPCS"`' in native, native
