from vllm._stub_types import AsyncEngineArgs

__all__ = ["AsyncEngineArgs"]
