"""A local fake Kubernetes API for scripts/verify's tests: an HTTP server on 127.0.0.1 that serves
object lists, single objects and pod logs from a scenario, accepts the NCCL gate's creates,
patches and deletes, and records every request. Bounded: it stops itself after `lifetime_s`
even if a test forgets to, and `with FakeKube(...)` stops it on exit.
"""

from __future__ import annotations

import copy
import json
import re
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

# /api/v1/namespaces/ns/pods, /apis/group/version/namespaces/ns/plural[/name][/log]
PATH = re.compile(r"^/(?:api/(?P<core>v1)|apis/(?P<group>[^/]+)/(?P<version>[^/]+))"
                  r"(?:/namespaces/(?P<ns>[^/]+))?/(?P<plural>[^/]+)(?:/(?P<name>[^/]+))?(?:/(?P<sub>log))?$")


@dataclass
class Scenario:
    objects: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Collection key (see `key`) -> objects."""
    logs: dict[str, str] = field(default_factory=dict)
    """"<namespace>/<pod>" -> log text."""
    on_create: Callable[[Scenario, str, dict[str, Any]], None] | None = None
    """Called after a POST, to let a scenario react (the NCCL job 'runs')."""

    def add(self, key: str, *objs: dict[str, Any]) -> None:
        self.objects.setdefault(key, []).extend(objs)


def key(plural: str, namespace: str | None = None, group: str = "") -> str:
    return f"{group}/{namespace or ''}/{plural}"


def _matches(obj: dict[str, Any], labels: str, fields: str) -> bool:
    have = obj.get("metadata", {}).get("labels") or {}
    for term in filter(None, labels.split(",")):
        k, _, v = term.partition("=")
        if have.get(k) != v:
            return False
    for term in filter(None, fields.split(",")):
        k, _, v = term.partition("=")
        if k == "spec.nodeName" and obj.get("spec", {}).get("nodeName") != v:
            return False
    return True


class FakeKube:
    def __init__(self, scenario: Scenario, lifetime_s: float = 120):
        self.scenario = scenario
        self.requests: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def _send(self, status: int, body: Any, content_type: str = "application/json") -> None:
                data = body.encode() if isinstance(body, str) else json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _body(self) -> dict[str, Any]:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}")

            def _route(self, method: str) -> None:
                url = urlparse(self.path)
                with fake.lock:
                    fake.requests.append((method, url.path))
                if url.path == "/version" or url.path == "/version/":
                    return self._send(200, {"major": "1", "minor": "34", "gitVersion": "v1.34.2"})
                m = PATH.match(url.path)
                if not m:
                    return self._send(404, {"kind": "Status", "code": 404, "reason": "NotFound"})
                group = "" if m["core"] else m["group"]
                coll = key(m["plural"], m["ns"], group)
                query = {k: v[0] for k, v in parse_qs(url.query).items()}
                with fake.lock:
                    items = fake.scenario.objects.setdefault(coll, [])
                    found = next((o for o in items if o["metadata"]["name"] == m["name"]), None)
                    if m["sub"] == "log":
                        log = fake.scenario.logs.get(f"{m['ns']}/{m['name']}")
                        return self._send(200, log, "text/plain") if log is not None else self._send(404, {})
                    if method == "GET" and m["name"] is None and m["ns"] is None and m["plural"] == "pods":
                        # All namespaces: every namespaced pod list of the scenario.
                        items = [o for c, objs in fake.scenario.objects.items()
                                 if c.startswith("/") and c.endswith("/pods") for o in objs]
                    if method == "GET" and m["name"] is None:
                        selected = [o for o in items if _matches(o, query.get("labelSelector", ""),
                                                                 query.get("fieldSelector", ""))]
                        return self._send(200, {"kind": "List", "apiVersion": "v1", "items": selected})
                    if method == "GET":
                        return self._send(200, found) if found else self._send(404, {"kind": "Status", "code": 404})
                    if method == "POST":
                        body = self._body()
                        body.setdefault("metadata", {})["uid"] = str(uuid.uuid4())
                        body["metadata"]["namespace"] = m["ns"]
                        items.append(body)
                        if fake.scenario.on_create:
                            fake.scenario.on_create(fake.scenario, coll, body)
                        return self._send(201, body)
                    if method == "PATCH":
                        if not found:
                            return self._send(404, {})
                        found["metadata"].update(self._body().get("metadata", {}))
                        return self._send(200, found)
                    if method == "DELETE":
                        if not found:
                            return self._send(404, {"kind": "Status", "code": 404})
                        items.remove(found)
                        return self._send(200, {"kind": "Status", "status": "Success"})
                return self._send(405, {})

            def do_GET(self):
                self._route("GET")

            def do_POST(self):
                self._route("POST")

            def do_PATCH(self):
                self._route("PATCH")

            def do_DELETE(self):
                self._route("DELETE")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.timer = threading.Timer(lifetime_s, self.stop)
        self.timer.daemon = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def kubeconfig(self) -> dict[str, Any]:
        return {"apiVersion": "v1", "kind": "Config", "current-context": "fake",
                "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                "users": [{"name": "fake", "user": {}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake"}}]}

    def start(self) -> FakeKube:
        self.thread.start()
        self.timer.start()
        return self

    def stop(self) -> None:
        self.timer.cancel()
        self.server.shutdown()
        self.server.server_close()

    def __enter__(self) -> FakeKube:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def calls(self, method: str) -> list[str]:
        with self.lock:
            return [path for m, path in self.requests if m == method]


def clone(scenario: Scenario) -> Scenario:
    return Scenario(copy.deepcopy(scenario.objects), dict(scenario.logs), scenario.on_create)
