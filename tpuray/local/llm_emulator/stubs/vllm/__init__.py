"""A stand-in for the vllm package on the emulator ONLY (tpuray/llm_emulator): the types Ray Serve LLM imports."""

__version__ = "0.0.0+tpuray.stub"

import _tpuray_fastapi_cbv  # noqa: E402,F401  (emulator only: Serve's class views on FastAPI >= 0.137)
