"""The vLLM types Ray Serve LLM (ray 2.60.0) imports, as small stand-ins for the emulator ONLY.

Why: ray.llm._internal.serve.core.configs.openai_api_models imports vLLM's OpenAI protocol
models at import time, and VLLMEngineConfig (which LLMServer.get_deployment_options builds)
imports vLLM's AsyncEngineArgs / FrontendArgs to sort engine_kwargs. vLLM has no CPU build
reachable here, so on the emulator these stand-ins take its place on the replicas' and
controller's PYTHONPATH (tpuray/local/llm_emulator/rewrite.py). They are never on the path of
anything that renders or deploys to GKE, where the serve-llm image carries the real vLLM.

What they do not model: vLLM's request validation (sampling parameters, tools, response
formats...), every engine argument vLLM has (only the subset below is accepted: an unknown
engine kwarg fails as it would with vLLM), and anything beyond the fields read by Ray's
OpenAI router and the stand-in engine.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


@dataclass
class AsyncEngineArgs:
    """The engine arguments the stand-in accepts (names as in vLLM's EngineArgs)."""

    model: str = ""
    tokenizer: str | None = None
    served_model_name: Any = None
    tensor_parallel_size: int = 1
    pipeline_parallel_size: int = 1
    data_parallel_size: int = 1
    max_model_len: int | None = None
    max_num_seqs: int | None = None
    max_num_batched_tokens: int | None = None
    gpu_memory_utilization: float = 0.9
    dtype: str = "auto"
    kv_cache_dtype: str = "auto"
    quantization: str | None = None
    seed: int | None = None
    enforce_eager: bool = False
    enable_prefix_caching: bool | None = None
    enable_chunked_prefill: bool | None = None
    load_format: str = "auto"
    download_dir: str | None = None
    distributed_executor_backend: str | None = None
    trust_remote_code: bool = False
    disable_log_stats: bool = False


@dataclass
class FrontendArgs:
    host: str | None = None
    port: int = 8000
    api_key: str | None = None
    chat_template: str | None = None
    response_role: str = "assistant"
    enable_auto_tool_choice: bool = False
    tool_call_parser: str | None = None


class _Open(BaseModel):
    model_config = ConfigDict(extra="allow", arbitrary_types_allowed=True)


class ChatCompletionRequest(_Open):
    model: str | None = None
    messages: list[dict[str, Any]]
    max_tokens: int | None = None
    max_completion_tokens: int | None = None
    stream: bool | None = False
    stream_options: dict[str, Any] | None = None
    request_id: str = Field(default_factory=lambda: f"chatcmpl-{uuid.uuid4().hex}")


class CompletionRequest(_Open):
    model: str | None = None
    prompt: Any
    max_tokens: int | None = 16
    stream: bool | None = False
    stream_options: dict[str, Any] | None = None
    request_id: str = Field(default_factory=lambda: f"cmpl-{uuid.uuid4().hex}")


class UsageInfo(_Open):
    prompt_tokens: int = 0
    completion_tokens: int = 0
    total_tokens: int = 0


class ChatCompletionResponse(_Open):
    id: str
    object: str = "chat.completion"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[dict[str, Any]]
    usage: UsageInfo


class ChatCompletionStreamResponse(_Open):
    id: str
    object: str = "chat.completion.chunk"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[dict[str, Any]]
    usage: UsageInfo | None = None


class CompletionResponse(_Open):
    id: str
    object: str = "text_completion"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[dict[str, Any]]
    usage: UsageInfo


class CompletionStreamResponse(_Open):
    id: str
    object: str = "text_completion"
    created: int = Field(default_factory=lambda: int(time.time()))
    model: str
    choices: list[dict[str, Any]]
    usage: UsageInfo | None = None


class ErrorInfo(_Open):
    message: str
    type: str
    param: str | None = None
    code: int


class ErrorResponse(_Open):
    error: ErrorInfo


# Not served by the stand-in engine; present because Ray imports the names.
class EmbeddingCompletionRequest(_Open):
    model: str | None = None
    input: Any = None


class EmbeddingChatRequest(_Open):
    model: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)


class EmbeddingResponse(_Open):
    pass


class ScoreTextRequest(_Open):
    model: str | None = None


class ScoreResponse(_Open):
    pass


class TokenizeCompletionRequest(_Open):
    model: str | None = None
    prompt: str = ""


class TokenizeChatRequest(_Open):
    model: str | None = None
    messages: list[dict[str, Any]] = Field(default_factory=list)


class TokenizeResponse(_Open):
    pass


class DetokenizeRequest(_Open):
    model: str | None = None
    tokens: list[int] = Field(default_factory=list)


class DetokenizeResponse(_Open):
    pass


class TranscriptionRequest(_Open):
    model: str | None = None


class TranscriptionResponse(_Open):
    pass


class TranscriptionStreamResponse(_Open):
    pass
