"""The /healthz app beside an application on real Ray Serve (127.0.0.1): it reports the
other application's state from serve.status() while that one loads, then ready.

The application watched stands in for Ray Serve LLM's OpenAI app (vLLM is not installable
here): a deployment whose constructor takes a while, as an engine loading a model does.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import requests

from ray_apps import health

try:
    from ray_fixtures import LocalRay, local_ray  # noqa: F401
except ImportError:
    from tests.ray_fixtures import LocalRay, local_ray  # noqa: F401

pytestmark = pytest.mark.slow

LOAD_S = 20


def _slow_model_app() -> Any:
    from ray import serve

    @serve.deployment(name="LLMServer:tiny", ray_actor_options={"num_cpus": 0.1})
    class SlowModel:
        def __init__(self, load_s: float) -> None:
            time.sleep(load_s)  # "loading the model"

        def __call__(self, request: Any) -> str:
            return "ok"

    return SlowModel.bind(LOAD_S)


def test_the_health_app_says_loading_with_serves_message_then_ready(local_ray: LocalRay) -> None:
    from ray import serve

    from ray_apps import health_app

    serve.start(http_options={"host": "127.0.0.1", "port": local_ray.http_port})
    try:
        serve.run(
            health_app.build_app({"application": "tpuray-serve", "model_id": "tiny"}),
            name="tpuray-serve-healthz",
            route_prefix=health.HEALTH_ROUTE,
        )
        url = f"http://127.0.0.1:{local_ray.http_port}{health.HEALTH_ROUTE}"
        before = requests.get(url, timeout=30)
        assert (before.status_code, before.json()["status"]) == (503, "waiting")
        assert before.json()["reason"] == "Serve has no application 'tpuray-serve' yet"

        deploying = threading.Thread(
            target=lambda: serve.run(_slow_model_app(), name="tpuray-serve", route_prefix="/", blocking=False)
        )
        deploying.start()
        seen: list[tuple[int, str, str | None]] = []
        deadline = time.monotonic() + LOAD_S + 120
        while time.monotonic() < deadline:
            resp = requests.get(url, timeout=30)
            body = resp.json()
            seen.append((resp.status_code, body["status"], body["reason"]))
            if body["status"] == "ready":
                break
            time.sleep(1)
        deploying.join(timeout=60)
        loading = [s for s in seen if s[1] == "loading"]
        assert loading, seen
        assert loading[0][0] == 503
        assert loading[0][2] is not None and loading[0][2].startswith("application tpuray-serve is DEPLOYING")
        assert seen[-1] == (200, "ready", None)
    finally:
        serve.shutdown()
