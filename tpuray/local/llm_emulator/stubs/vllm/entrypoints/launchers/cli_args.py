from vllm._stub_types import FrontendArgs

__all__ = ["FrontendArgs"]
