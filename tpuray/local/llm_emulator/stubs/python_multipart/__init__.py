"""A stand-in for python-multipart on the emulator ONLY: FastAPI checks that it is importable
when Ray Serve LLM's router declares its form-data route (/v1/audio/transcriptions), which the
stand-in engine does not serve; the serve-llm image has the real package (a vLLM dependency)."""

__version__ = "0.0.20"
