"""On the emulated TPU hosts' PYTHONPATH: make this virtualenv look like the ray-tpu image.

The image carries Ray, JAX and the apps' dependencies but not `ray_apps`: that arrives in
the runtime_env working_dir (the bundle). This project's editable install would otherwise
import `ray_apps` from the checkout on every host and hide a bundle that lacks it.
"""

import sys

for _name, _module in list(sys.modules.items()):
    if _name.startswith("__editable__") and _name.endswith("_finder"):
        getattr(_module, "MAPPING", {}).pop("ray_apps", None)
