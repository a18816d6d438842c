from vllm._stub_types import ErrorInfo, ErrorResponse

__all__ = ["ErrorInfo", "ErrorResponse"]
