"""Ray Serve LLM on the emulator: the CPU stand-in engine (standin.py), the stand-in vLLM
types it needs (stubs/, never on a GKE path) and the rewrite of the rendered app (rewrite.py)."""
