"""Ray applications that run on the TPU slices the Pulumi program provisions.

- ray_apps.features: the synthetic data set and its pure-numpy preprocessing (no Ray).
- ray_apps.data: the Ray Data pipeline (Parquet/JSONL -> features -> jax.Array batches).
- ray_apps.model: the MLP, its optax train step and checkpoint files (no Ray).
- ray_apps.train: the Ray Train v2 JaxTrainer program (tpu / emulated / cpu).
- ray_apps.serve: the Ray Serve application builder (llm and checkpoint backends).

TPU arithmetic (hosts, chips per host, accelerator type) is never done here: callers pass
the values the catalog (tpuray.catalog) computed.
"""
