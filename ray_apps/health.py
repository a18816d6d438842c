"""What a Serve backend says at GET /healthz: its state and, unless ready, why.

One small state value per backend, set by the code that waits and loads:

    waiting  nothing to load yet     {"status": "waiting", "reason": "no checkpoint yet at gs://b/runs/r"}
    loading  loading the model       {"status": "loading", "reason": "loading checkpoint_step_00000020 ..."}
    ready    serving                 {"status": "ready", "reason": null, ...}
    failed   it will not become ready without help   {"status": "failed", "reason": "..."}

HTTP status: 200 when ready, 503 otherwise, so a probe or a load balancer reads the same
answer a person does.

- The checkpoint backend (ray_apps.serve) keeps a `Health` in its predictor; whatever waits
  for or loads the checkpoint sets it.
- The llm backend is Ray Serve LLM's own OpenAI application, whose ingress has no route of
  ours. Its state is what Serve reports for the application (`serve.status()`): `ray_apps.health_app`
  is a tiny CPU deployment, deployed beside it at /healthz, that translates Serve's
  application and deployment statuses (Ray 2.60.0 `serve/schema.py`: ApplicationStatus
  NOT_STARTED, DEPLOYING, RUNNING, DEPLOY_FAILED, UNHEALTHY, DELETING) into the same four
  states, with Serve's own messages as the reason.
"""

# No `from __future__ import annotations`: FastAPI must see the response model as a class.
import threading
from enum import Enum
from typing import Any

from pydantic import BaseModel

OK, UNAVAILABLE = 200, 503
HEALTH_APP_CPUS = 0.1
HEALTH_APP_IMPORT_PATH = "ray_apps.health_app:build_app"
HEALTH_ROUTE = "/healthz"


class State(str, Enum):
    WAITING = "waiting"
    LOADING = "loading"
    READY = "ready"
    FAILED = "failed"


class HealthReport(BaseModel):
    """The body of GET /healthz."""

    status: State
    reason: str | None = None
    backend: str
    model_id: str
    model_step: int | None = None
    # Where the replica runs on the capacity chain (docs/capacity.md): slice, generation, tier,
    # and whether that is a fallback shape of the chain.
    placement: dict[str, Any] | None = None

    @property
    def http_status(self) -> int:
        return OK if self.status is State.READY else UNAVAILABLE


class Health:
    """A backend's current state and reason; thread-safe (a loader thread may set it while
    the HTTP route reads it)."""

    def __init__(self, backend: str, model_id: str, state: State = State.LOADING, reason: str | None = None) -> None:
        self.backend, self.model_id = backend, model_id
        self._lock = threading.Lock()
        self._state, self._reason = state, reason
        self.model_step: int | None = None
        self.placement: dict[str, Any] | None = None

    def set(self, state: State, reason: str | None = None) -> None:
        if state is not State.READY and not reason:
            raise ValueError(f"state {state.value} needs a reason")
        with self._lock:
            self._state, self._reason = state, (None if state is State.READY else reason)

    @property
    def state(self) -> State:
        with self._lock:
            return self._state

    def report(self) -> HealthReport:
        with self._lock:
            return HealthReport(
                status=self._state,
                reason=self._reason,
                backend=self.backend,
                model_id=self.model_id,
                model_step=self.model_step,
                placement=self.placement,
            )


# ---------------------------------------------------------------- from Serve's own status

_APP_STATES = {
    "NOT_STARTED": State.WAITING,
    "DEPLOYING": State.LOADING,
    "RUNNING": State.READY,
    "DEPLOY_FAILED": State.FAILED,
    "UNHEALTHY": State.FAILED,
    "DELETING": State.FAILED,
}


def _value(status: Any) -> str:
    return str(getattr(status, "value", status))


def state_of_application(app: str, serve_status: Any) -> tuple[State, str | None]:
    """(state, reason) of one Serve application, from a `ray.serve.schema.ServeStatus`.

    The reason is Serve's application message plus each deployment that is not HEALTHY with
    its status and message (e.g. a replica constructor's exception, or "... replicas that
    have taken more than 30s to be scheduled": no whole slice free)."""
    overview = serve_status.applications.get(app)
    if overview is None:
        return State.WAITING, f"Serve has no application {app!r} yet"
    app_status = _value(overview.status)
    state = _APP_STATES.get(app_status, State.FAILED)
    if state is State.READY:
        return state, None
    parts = [f"application {app} is {app_status}"]
    if overview.message:
        parts.append(overview.message.strip())
    for name, dep in sorted(overview.deployments.items()):
        if _value(dep.status) != "HEALTHY":
            detail = f"deployment {name} {_value(dep.status)}"
            parts.append(f"{detail}: {dep.message.strip()}" if dep.message else detail)
    return state, "; ".join(parts)


def application_report(app: str, model_id: str, serve_status: Any, backend: str = "llm") -> HealthReport:
    state, reason = state_of_application(app, serve_status)
    return HealthReport(status=state, reason=reason, backend=backend, model_id=model_id)


def app_entry(application: str, model_id: str, runtime_env: dict[str, Any] | None = None) -> dict[str, Any]:
    """The Serve config `applications` entry of the /healthz app for `application`. Its one
    deployment says it needs a fraction of a CPU and no TPU (the RayService policy reads it)."""
    entry: dict[str, Any] = {
        "name": f"{application}-healthz",
        "route_prefix": HEALTH_ROUTE,
        "import_path": HEALTH_APP_IMPORT_PATH,
        "args": {"application": application, "model_id": model_id},
        "deployments": [{"name": "healthz", "ray_actor_options": {"num_cpus": HEALTH_APP_CPUS}}],
    }
    if runtime_env is not None:
        entry["runtime_env"] = runtime_env
    return entry
