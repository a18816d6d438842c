"""A CPU stand-in for vLLM behind Ray Serve LLM's engine seam, for the emulator only.

The seam: Ray Serve LLM's LLMServer (ray 2.60.0, ray/llm/_internal/serve/core/server/
llm_server.py) starts `self._engine_cls(llm_config)` and awaits its `start()`; the class
comes from `engine_cls=` or, when a Serve config deploys it, from the environment variable
RAYLLM_VLLM_ENGINE_CLS ("for testing or escape-hatch for patching purposes", Ray's words),
which the emulator's rewrite sets to this class (tpuray/local/llm_emulator/rewrite.py). Everything
around it is Ray's: build_openai_app, the OpenAI router (OpenAiIngress), LLMServer, and the
placement: `start()` asks Ray's own VLLMEngineConfig for the replica's placement group
(get_or_create_pg -> TPUAccelerator.create_placement_group -> ray.util.tpu
slice_placement_group for a config with a topology), exactly as VLLMEngine does before vLLM
starts its workers in it.

What the stand-in does not model: loading weights (no download from modelSource: Ray's
initialize_node is not called), tokenization, sampling, batching and the KV cache, vLLM's
TPU workers (no process runs in the bundles: they are reserved, not used), XLA compilation
and vLLM's start-up time, and every request type but chat and text completions. Its answer
is deterministic text that names where the replica's slice is, so tests can see it.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncGenerator
from typing import Any

import ray
from ray.llm._internal.serve.core.engine.protocol import LLMEngine
from ray.util.placement_group import placement_group_table

from tpuray.labels import RAY_TPU_SLICE_NAME


class StandInEngine(LLMEngine):
    def __init__(self, llm_config: Any) -> None:
        self.llm_config = llm_config
        self.placement: dict[str, Any] = {}
        self._engine_config: Any = None

    async def start(self) -> None:
        self._engine_config = self.llm_config.get_engine_config()
        pg = self._engine_config.get_or_create_pg()  # Ray's path: a whole slice when a topology is set
        await pg.ready()
        table = placement_group_table(pg)
        node_slices = {n["NodeID"]: (n.get("Labels") or {}).get(RAY_TPU_SLICE_NAME) for n in ray.nodes()}
        nodes = [table["bundles_to_node_id"][i] for i in sorted(table["bundles_to_node_id"])]
        self.placement = {
            "placement_group": table["placement_group_id"],
            "bundles": [table["bundles"][i] for i in sorted(table["bundles"])],
            "slices": sorted({node_slices.get(n) or "?" for n in nodes}),
            "hosts": len(set(nodes)),
        }

    async def check_health(self) -> None:
        return None

    def routing_stats(self) -> dict[str, Any]:
        return {}

    async def reset_prefix_cache(self) -> None:
        return None

    async def resolve_lora(self, lora_model: Any) -> None:
        raise NotImplementedError("the stand-in engine serves no LoRA adapters")

    async def embeddings(self, request: Any, raw_request_info: Any = None) -> AsyncGenerator[Any, None]:
        raise NotImplementedError("the stand-in engine serves chat and text completions only")
        yield  # an async generator, as the protocol declares

    async def transcriptions(self, request: Any, raw_request_info: Any = None) -> AsyncGenerator[Any, None]:
        raise NotImplementedError("the stand-in engine serves chat and text completions only")
        yield

    def _text(self) -> str:
        return f"stand-in engine on slice {','.join(self.placement.get('slices', ['?']))}"

    async def chat(self, request: Any, raw_request_info: Any = None) -> AsyncGenerator[Any, None]:
        from ray.llm._internal.serve.core.configs.openai_api_models import (
            ChatCompletionResponse,
            ChatCompletionStreamResponse,
        )

        text, rid = self._text(), getattr(request, "request_id", None) or f"chatcmpl-{uuid.uuid4().hex}"
        words = text.split(" ")
        usage = {"prompt_tokens": 1, "completion_tokens": len(words), "total_tokens": 1 + len(words)}
        if getattr(request, "stream", False):
            for i, word in enumerate(words):
                delta = {"content": word if i == 0 else " " + word}
                yield ChatCompletionStreamResponse(
                    id=rid, model=self.llm_config.model_id, choices=[{"index": 0, "delta": delta}]
                )
            yield ChatCompletionStreamResponse(id=rid, model=self.llm_config.model_id, choices=[], usage=usage)
            return
        message = {"role": "assistant", "content": text}
        yield ChatCompletionResponse(
            id=rid,
            model=self.llm_config.model_id,
            choices=[{"index": 0, "message": message, "finish_reason": "stop"}],
            usage=usage,
        )

    async def completions(self, request: Any, raw_request_info: Any = None) -> AsyncGenerator[Any, None]:
        from ray.llm._internal.serve.core.configs.openai_api_models import CompletionResponse

        text = self._text()
        yield CompletionResponse(
            id=getattr(request, "request_id", None) or f"cmpl-{uuid.uuid4().hex}",
            created=int(time.time()),
            model=self.llm_config.model_id,
            choices=[{"index": 0, "text": text, "finish_reason": "stop"}],
            usage={"prompt_tokens": 1, "completion_tokens": len(text.split()), "total_tokens": 1 + len(text.split())},
        )

    async def shutdown(self) -> None:
        if self._engine_config is not None:
            self._engine_config.accelerator.shutdown()
