from vllm._stub_types import TranscriptionRequest, TranscriptionResponse, TranscriptionStreamResponse

__all__ = ["TranscriptionRequest", "TranscriptionResponse", "TranscriptionStreamResponse"]
