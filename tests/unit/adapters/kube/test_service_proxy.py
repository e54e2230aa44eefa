"""The service-proxy path the plugin asks the API server for, and which 404 means "no such Service"."""

from __future__ import annotations

import json

from watchtower.adapters.kube.service_proxy import ProxyAnswer, missing_service, proxy_path


def test_the_proxy_path_names_namespace_service_and_port_escaped() -> None:
    assert (
        proxy_path("watchtower", "watchtower", 8080, "/api/v1/queue")
        == "/api/v1/namespaces/watchtower/services/watchtower:8080/proxy/api/v1/queue"
    )
    assert proxy_path("wt", "svc", "http", "/x").endswith("/services/svc:http/proxy/x")
    assert proxy_path("a/b", "c", "1", "/").startswith("/api/v1/namespaces/a%2Fb/services/")


def test_only_the_api_servers_not_found_for_services_is_a_missing_service() -> None:
    status = {"kind": "Status", "reason": "NotFound", "details": {"name": "watchtower", "kind": "services"}}
    assert missing_service(ProxyAnswer(404, json.dumps(status).encode()))
    assert not missing_service(ProxyAnswer(503, json.dumps(status).encode()))
    # Watchtower's own 404 (no such workload) is a Problem body, passed through by the proxy.
    assert not missing_service(ProxyAnswer(404, b'{"detail": "no workload vision/x in the queue"}'))
    assert not missing_service(ProxyAnswer(404, b"<html>not found</html>"))
