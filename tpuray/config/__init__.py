"""The typed stack configuration, validated before any resource is declared (public API).

Stack config lives in stacks/Pulumi.<env>.yaml under the `tpuray:` namespace. The raw mapping
(from the YAML file, or from pulumi.Config under the CLI) goes through `parse_stack_config`,
which either returns a `StackConfig` or raises `ConfigError` holding one line per problem: the
key, the bad value and what is allowed. `load_stack("dev")` reads and parses a stack file. Both
live in tpuray/config/checks.py, which runs every check module (tpuray/checks/) and the desired
state's derived-fact checks: this package's __init__ exports the models alone, so that a check
module may import a model without importing the checks that import it.

The package, one module per job: base.py (the model base, namespace and keys), the models by
concept (cluster.py, pools.py, workloads.py, schema.py for `StackConfig`), checks.py (parsing and
every check across keys), files.py (stack-file I/O) and encoding.py (the Pulumi engine's form).
"""

from __future__ import annotations

from tpuray.config.base import CONFIG_KEYS, NAMESPACE, ConfigModel
from tpuray.config.cluster import AuthorizedNetwork, ClusterConfig, CpuPoolConfig, GcpConfig
from tpuray.config.encoding import pulumi_config_map
from tpuray.config.files import (
    STACK_FILE,
    name_of_stack_file,
    read_stack_file,
    resolve_stack_file,
    stack_file_in,
    stack_files,
    stack_name,
    stack_names,
    stacks_dir,
)
from tpuray.config.pools import (
    UNLISTED_CAPACITY,
    CapacityTier,
    FallbackShape,
    ReservationRef,
    SlicePoolConfig,
    price_tiers,
    tier_keys,
    tier_order,
)
from tpuray.config.schema import (
    IMAGE_NAMES,
    BudgetConfig,
    HungGangConfig,
    ImagesConfig,
    ObservabilityConfig,
    StackConfig,
    TerraformConfig,
    TerraformOutputs,
)
from tpuray.config.workloads import (
    InteractiveCluster,
    LlmAutoscaling,
    RayConfig,
    ServeWorkload,
    SliceRange,
    TrainWorkload,
    WorkloadsConfig,
)
from tpuray.errors import ConfigError

__all__ = [
    "AuthorizedNetwork",
    "BudgetConfig",
    "CONFIG_KEYS",
    "CapacityTier",
    "ClusterConfig",
    "ConfigError",
    "ConfigModel",
    "CpuPoolConfig",
    "FallbackShape",
    "GcpConfig",
    "HungGangConfig",
    "IMAGE_NAMES",
    "ImagesConfig",
    "InteractiveCluster",
    "LlmAutoscaling",
    "SliceRange",
    "NAMESPACE",
    "ObservabilityConfig",
    "RayConfig",
    "ReservationRef",
    "STACK_FILE",
    "ServeWorkload",
    "SlicePoolConfig",
    "StackConfig",
    "TerraformConfig",
    "TerraformOutputs",
    "TrainWorkload",
    "UNLISTED_CAPACITY",
    "WorkloadsConfig",
    "name_of_stack_file",
    "price_tiers",
    "pulumi_config_map",
    "read_stack_file",
    "resolve_stack_file",
    "stack_file_in",
    "stack_files",
    "stack_name",
    "stack_names",
    "stacks_dir",
    "tier_keys",
    "tier_order",
]
