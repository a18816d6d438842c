"""Emulator only: Serve's class-based FastAPI views on FastAPI >= 0.137 (ray 2.60.0).

Serve's `make_fastapi_class_based_view` gives each method route's `self` a default that
injects the replica, then re-mounts the routes with `include_router` so that FastAPI analyses
their parameters again. Since FastAPI 0.137 `include_router` keeps the original route objects
(an `_IncludedRouter` node), so the analysis made before the change stands and `self` stays a
required query parameter: every `POST /v1/chat/completions` of Ray Serve LLM's router answers
422/400 "Field required at ('query', 'self')" (ray-project/ray#64475; #64531 walks the nested
routes but does not rebuild them). The lock pins fastapi 0.165.0. This wrapper rebuilds each
class-view route after Serve's transform, which is what include_router did before 0.137, around
an endpoint that keeps its new signature when the app is pickled to the replica.

Imported by the stand-in vllm package (the first thing Ray Serve LLM imports on the emulator);
On GKE the same bug hits the serve-llm image if its FastAPI is 0.137 or later: docs/apps.md.
"""

from __future__ import annotations

import inspect
from typing import Any

from fastapi.routing import APIRoute
from ray.serve import api as serve_api
from ray.serve._private import http_util

_original = http_util.make_fastapi_class_based_view


def _by_value(endpoint: Any) -> Any:
    """The endpoint as a closure: cloudpickle ships a closure by value, with the `self`-injecting
    signature Serve gave it; the method itself travels by reference and arrives without it, and
    FastAPI >= 0.137 analyses included routes again in the replica, at request time."""
    if inspect.iscoroutinefunction(endpoint):

        async def call(*args: Any, **kwargs: Any) -> Any:
            return await endpoint(*args, **kwargs)
    else:

        def call(*args: Any, **kwargs: Any) -> Any:
            return endpoint(*args, **kwargs)

    call.__signature__ = inspect.signature(endpoint)  # type: ignore[attr-defined]
    call.__name__, call.__doc__ = endpoint.__name__, endpoint.__doc__
    call._serve_cls = endpoint._serve_cls  # type: ignore[attr-defined]
    return call


def _rebuilt(route: APIRoute) -> APIRoute:
    names = [n for n in inspect.signature(APIRoute.__init__).parameters if n not in ("self", "path", "endpoint")]
    kwargs = {n: getattr(route, n) for n in names if hasattr(route, n)}
    return type(route)(route.path, _by_value(route.endpoint), **kwargs)


def make_fastapi_class_based_view(fastapi_app: Any, cls: type) -> None:
    _original(fastapi_app, cls)
    for route, parent, _prefix in list(http_util._walk_fastapi_routes(fastapi_app)):
        if isinstance(route, APIRoute) and getattr(route.endpoint, "_serve_cls", None) is cls:
            parent.routes[parent.routes.index(route)] = _rebuilt(route)


if getattr(http_util.make_fastapi_class_based_view, "__module__", "") != __name__:
    http_util.make_fastapi_class_based_view = make_fastapi_class_based_view
    serve_api.make_fastapi_class_based_view = make_fastapi_class_based_view
