"""Cluster DNS and kube-proxy for HTTP callers outside the pods' network: an HTTP forward proxy on
127.0.0.1 that sends `http://<service>.<namespace>.svc.cluster.local:<port>/...` (and
`http://<pod IP>:<port>/...`) to the pod behind it, inside the pods' network namespace.

The KubeRay operator reaches a Ray head's dashboard at its Service's cluster DNS name
(`utils.FetchHeadServiceURL`, ray-operator v1.5.0) with a Go `http.Client` whose default
transport honours HTTP_PROXY, so the operator is started with HTTP_PROXY pointing here; the tests
use the same proxy. Only plain HTTP is proxied (no CONNECT).
"""

from __future__ import annotations

import http.client
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

from tpuray.local.substrate.netns import PodNetwork

Resolver = Callable[[str, int], int | None]  # (host, port) -> the port inside the namespace
HOP_HEADERS = {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "trailer",
               "transfer-encoding", "upgrade"}  # fmt: skip


class ServiceProxy:
    def __init__(self, network: PodNetwork, resolve: Resolver):
        outer = self
        self.network, self.resolve = network, resolve

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _forward(self) -> None:
                url = urlsplit(self.path)
                port = outer.resolve(url.hostname or "", url.port or 80)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if port is None:
                    self._reply(502, {}, f"no pod behind {url.hostname}:{url.port}\n".encode())
                    return
                try:
                    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                    conn.sock = outer.network.connect_inside(port)
                    headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_HEADERS}
                    conn.request(self.command, url.path + (f"?{url.query}" if url.query else ""), body, headers)
                    response = conn.getresponse()
                    data = response.read()
                    conn.close()
                except OSError as err:
                    self._reply(502, {}, f"{url.hostname}:{url.port}: {err}\n".encode())
                    return
                out = {k: v for k, v in response.getheaders() if k.lower() not in HOP_HEADERS | {"content-length"}}
                self._reply(response.status, out, data)

            def _reply(self, status: int, headers: dict[str, str], data: bytes) -> None:
                self.send_response(status)
                for k, v in headers.items():
                    self.send_header(k, v)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _forward

            def log_message(self, *_args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, name="service-proxy", daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
