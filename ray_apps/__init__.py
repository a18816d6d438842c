"""Ray applications that run on the TPU slices the Pulumi program provisions.

- ray_apps.features: the synthetic data set and its pure-numpy preprocessing (no Ray).
- ray_apps.data: the Ray Data pipeline (Parquet/JSONL -> features -> jax.Array batches).
- ray_apps.model: the MLP, its optax train step and checkpoint files (no Ray).
- ray_apps.train: the Ray Train v2 JaxTrainer program (tpu / emulated / cpu).
- ray_apps.serve: the Ray Serve application builder (llm and checkpoint backends).
- ray_apps.health: what a backend says at GET /healthz (waiting/loading/ready/failed, why);
  ray_apps.health_app: the /healthz app deployed beside an llm app.
- ray_apps.watchdog: the step watchdog and the training progress gauges.

TPU arithmetic (hosts, chips per host, accelerator type) is never done here: callers pass
the values the catalog (tpuray.catalog) computed.
"""

import json as _json
from pathlib import Path as _Path


def code_identity() -> dict[str, str | None]:
    """Where ray_apps was imported from, and the sources digest of the bundle it came in.

    `tpuray bundle` writes ray_apps/bundle.json into the zip; a checkout has none (None)."""
    here = _Path(__file__).resolve().parent
    manifest = here / "bundle.json"
    sources = _json.loads(manifest.read_text())["sources_sha256"] if manifest.is_file() else None
    return {"imported_from": str(here), "sources_sha256": sources}
