"""Where the shared reference data lives (CRD schemas, conformance samples, fact sheets).

It is test data: TPURAY_SHARED points at it, with the `shared/` folder beside the
repository as the default. The one exception is the CRD schemas, which the product needs
at run time: they ship in the package (tpuray/data/schemas, tpuray.checks.schemas) and a test
proves them identical to shared/schemas.
"""

from __future__ import annotations

import os
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
ENV_VAR = "TPURAY_SHARED"


class SharedDataMissing(FileNotFoundError):
    pass


def shared_dir() -> Path:
    path = Path(os.environ.get(ENV_VAR, REPO_ROOT.parent / "shared"))
    if not path.is_dir():
        raise SharedDataMissing(
            f"shared reference data not found at {path}. Set {ENV_VAR} to the folder that holds "
            "schemas/ (the KubeRay CRDs from ray-project/kuberay ray-operator/config/crd/bases and the GKE "
            "ComputeClass CRD from GoogleCloudPlatform/compute-class-api) and conformance/."
        )
    return path


def shared_path(*parts: str) -> Path:
    path = shared_dir().joinpath(*parts)
    if not path.exists():
        raise SharedDataMissing(f"{path} is missing from the shared reference data ({ENV_VAR}={shared_dir()})")
    return path
