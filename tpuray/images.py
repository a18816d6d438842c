"""The container images this repository builds (images/<name>/Dockerfile) and how objects name them.

- `ray-tpu`: FROM the pinned rayproject/ray:<version>-<py>-tpu plus the apps' Python
  dependencies at the lock file's versions: train, data, the checkpoint server and the
  interactive cluster. Pods install nothing at start (no runtime_env pip).
- `serve-llm`: the same base plus the pinned vLLM TPU build, for the `llm` Serve backend.

The deploy workflow builds and pushes both to the Artifact Registry repository of
`tpuray:images.repository` and hands their digests to `pulumi up`
(`tpuray:images.digests.<name>`). Rendered objects then name `<repository>/<name>@sha256:...`
and record the -tpu base in the pod template annotation `labels.BASE_IMAGE` (the same
value as the image's OCI label `org.opencontainers.image.base.name`). Without a digest
(an offline preview), objects keep the pinned -tpu base, preview says which image it would
build, and a real `pulumi up` stops: no digest is ever invented.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import yaml

from tpuray.config import IMAGE_NAMES, StackConfig
from tpuray.shared import REPO_ROOT

IMAGES_DIR = REPO_ROOT / "images"
# The apps' Python dependencies on top of the -tpu base (which carries jax[tpu] and Ray),
# installed into the ray-tpu image at the versions requirements.lock pins.
APP_PACKAGES = ("optax",)
# The vLLM TPU build, pinned here (not in requirements.lock: it does not install on CPU CI):
# 0.29.0, the vLLM release that ray 2.60.0's `ray[llm]` extra requires (images/serve-llm/Dockerfile).
VLLM_TPU_PACKAGES = {"vllm-tpu": "0.29.0", "tpu-inference": "0.29.0"}
OCI_BASE_LABEL = "org.opencontainers.image.base.name"
# The reviewed digest of each base (FROM <base>@${BASE_DIGEST}): images/base-images.lock.
BASE_LOCK = IMAGES_DIR / "base-images.lock"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")


class BaseLockError(ValueError):
    """images/base-images.lock holds something that is not a digest."""


def base_digest(base: str, lock: Path | None = None) -> str | None:
    """The digest recorded for `base`, or None when none is (never a made-up one)."""
    entries = yaml.safe_load((lock or BASE_LOCK).read_text()) or {}
    digest = (entries.get(base) or {}).get("digest")
    if digest is not None and not (isinstance(digest, str) and DIGEST.match(digest)):
        raise BaseLockError(f"{(lock or BASE_LOCK).name}: {base}: digest {digest!r} is not sha256:<64 hex>")
    return digest


def dockerfile(name: str) -> Path:
    return IMAGES_DIR / name / "Dockerfile"


def lock_pins(names: tuple[str, ...] = APP_PACKAGES, lock: Path | None = None) -> dict[str, str]:
    """name -> version for each package, read from the product's lock file (requirements.lock)."""
    pins = {}
    for line in (lock or REPO_ROOT / "requirements.lock").read_text().splitlines():
        name, sep, version = line.partition("==")
        if sep:
            pins[name.strip().lower().replace("_", "-")] = version.strip()
    return {n: pins[n] for n in names}


def base_image(cfg: StackConfig) -> str:
    return f"rayproject/ray:{cfg.ray.version}-{cfg.ray.python}-tpu"


@dataclass(frozen=True)
class ImageRef:
    name: str  # ray-tpu | serve-llm
    image: str  # what the rendered objects name
    base: str  # the pinned -tpu base it is built FROM
    built: bool  # a digest of this project's build is known

    def describe(self, repository: str | None) -> str:
        """One line for preview: the image in use, or the one it would build (never a made-up digest)."""
        source = f"{dockerfile(self.name).relative_to(REPO_ROOT)} FROM {self.base}"
        if self.built:
            return f"{self.image} (built from {source})"
        target = f"{repository}/{self.name}" if repository else "tpuray:images.repository (not set)"
        return (
            f"would build {source} and push it to {target}; no digest yet, so the objects show the base "
            f"until tpuray:images.digests.{self.name} is set"
        )


def build_args(cfg: StackConfig, name: str) -> dict[str, str]:
    """The --build-arg values of images/<name>/Dockerfile: the stack's Ray pin, the lock's versions and
    the base's recorded digest (none when none is recorded: the build then fails at FROM)."""
    args = {"RAY_VERSION": cfg.ray.version, "PYTHON_TAG": cfg.ray.python}
    digest = base_digest(base_image(cfg))
    if digest:
        args["BASE_DIGEST"] = digest
    args.update({f"{p.upper().replace('-', '_')}_VERSION": v for p, v in lock_pins().items()})
    if name == "serve-llm":
        args.update({f"{p.upper().replace('-', '_')}_VERSION": v for p, v in VLLM_TPU_PACKAGES.items()})
    return args


def build_plan(cfg: StackConfig) -> dict[str, object]:
    """What the deploy workflow builds and where it pushes (`tpuray images STACK --json`)."""
    names = sorted({ref.name for ref in workload_images(cfg).values()})
    return {
        "repository": cfg.images.repository,
        "images": [
            {
                "name": name,
                "dockerfile": str(dockerfile(name).relative_to(REPO_ROOT)),
                "context": str(dockerfile(name).parent.relative_to(REPO_ROOT)),
                "target": f"{cfg.images.repository}/{name}" if cfg.images.repository else None,
                "base": base_image(cfg),
                "base_digest": base_digest(base_image(cfg)),
                "build_args": build_args(cfg, name),
            }
            for name in names
        ],
    }


def image_for(cfg: StackConfig, name: str) -> ImageRef:
    if name not in IMAGE_NAMES:
        raise ValueError(f"image {name!r} is not built here; valid: {', '.join(IMAGE_NAMES)}")
    base = base_image(cfg)
    if cfg.ray.image:  # an explicit override names one image for everything
        return ImageRef(name, cfg.ray.image, base, built="@sha256:" in cfg.ray.image)
    digest = cfg.images.digests.get(name)
    if cfg.images.repository and digest:
        return ImageRef(name, f"{cfg.images.repository}/{name}@{digest}", base, built=True)
    return ImageRef(name, base, base, built=False)


def workload_images(cfg: StackConfig) -> dict[str, ImageRef]:
    """The image of each declared workload (train, serve, interactive)."""
    wl = cfg.workloads
    out = {}
    if wl.train:
        out["train"] = image_for(cfg, "ray-tpu")
    if wl.serve:
        out["serve"] = image_for(cfg, "serve-llm" if wl.serve.backend == "llm" else "ray-tpu")
    if wl.interactive:
        out["interactive"] = image_for(cfg, "ray-tpu")
    return out
