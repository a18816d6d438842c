"""The stack's desired state, Pulumi-free: what `desire(cfg)` computes once from the typed config
(pools, Ray objects, their worker groups, images, entrypoints) and the models every reader of a
rendered object reads it back through (`WorkerGroup`). The Pulumi components in infra/ only
serialise these pieces (docs/architecture.md)."""
