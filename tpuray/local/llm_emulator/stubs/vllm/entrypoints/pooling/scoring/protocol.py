from vllm._stub_types import ScoreResponse, ScoreTextRequest

__all__ = ["ScoreResponse", "ScoreTextRequest"]
