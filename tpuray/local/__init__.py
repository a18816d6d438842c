"""The local substrate: emulated TPU slices on real Ray raylets (emulator), the GCS and LLM
stand-ins (storage_emulator, llm_emulator), the rendered objects run on them (localrun), their
metrics (localmetrics) and the demo's summary."""
