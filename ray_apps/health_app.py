"""The /healthz application deployed beside an llm application (see ray_apps.health).

Serve config entry: ray_apps.health.app_entry(...); import_path ray_apps.health_app:build_app.
"""

# No `from __future__ import annotations`: FastAPI must see the response model as a class.
from typing import Any

from fastapi import FastAPI, Response
from pydantic import BaseModel, ConfigDict
from ray import serve

from ray_apps.health import HEALTH_APP_CPUS, HealthReport, application_report


class HealthAppArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    application: str  # the Serve application whose state this reports
    model_id: str
    backend: str = "llm"


health_api = FastAPI(title="tpuray backend health", version="1")


@serve.deployment(name="healthz", ray_actor_options={"num_cpus": HEALTH_APP_CPUS})
@serve.ingress(health_api)
class HealthApp:
    def __init__(self, application: str, model_id: str, backend: str) -> None:
        self.application, self.model_id, self.backend = application, model_id, backend

    @health_api.get("/", response_model=HealthReport)
    def healthz(self, response: Response) -> HealthReport:
        report = application_report(self.application, self.model_id, serve.status(), self.backend)
        response.status_code = report.http_status  # 200 ready, 503 otherwise
        return report


def build_app(args: dict[str, Any]) -> Any:
    """Serve application builder (import_path ray_apps.health_app:build_app)."""
    parsed = HealthAppArgs.model_validate(args or {})
    return HealthApp.bind(parsed.application, parsed.model_id, parsed.backend)
