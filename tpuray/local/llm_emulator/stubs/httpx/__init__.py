"""A stand-in for httpx on the emulator ONLY: Ray Serve LLM imports one exception class from it
(ray/llm/_internal/serve/utils/server_utils.py); the serve-llm image has the real httpx (a vLLM
dependency)."""


class HTTPStatusError(Exception):
    pass
