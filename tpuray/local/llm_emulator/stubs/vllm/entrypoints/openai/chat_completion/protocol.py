from vllm._stub_types import ChatCompletionRequest, ChatCompletionResponse, ChatCompletionStreamResponse

__all__ = ["ChatCompletionRequest", "ChatCompletionResponse", "ChatCompletionStreamResponse"]
