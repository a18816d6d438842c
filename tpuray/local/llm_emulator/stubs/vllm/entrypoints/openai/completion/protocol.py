from vllm._stub_types import CompletionRequest, CompletionResponse, CompletionStreamResponse

__all__ = ["CompletionRequest", "CompletionResponse", "CompletionStreamResponse"]
