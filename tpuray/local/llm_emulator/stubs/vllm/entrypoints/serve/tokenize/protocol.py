from vllm._stub_types import (
    DetokenizeRequest,
    DetokenizeResponse,
    TokenizeChatRequest,
    TokenizeCompletionRequest,
    TokenizeResponse,
)

__all__ = [
    "DetokenizeRequest",
    "DetokenizeResponse",
    "TokenizeChatRequest",
    "TokenizeCompletionRequest",
    "TokenizeResponse",
]
