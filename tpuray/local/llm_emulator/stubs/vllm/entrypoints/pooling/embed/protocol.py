from vllm._stub_types import EmbeddingChatRequest, EmbeddingCompletionRequest, EmbeddingResponse

__all__ = ["EmbeddingChatRequest", "EmbeddingCompletionRequest", "EmbeddingResponse"]
