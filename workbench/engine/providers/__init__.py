"""Model providers: the Anthropic API and the offline scripted replay."""

from workbench.engine.providers.base import (
    ContextLimitExceeded,
    ModelRequest,
    ModelResponse,
    Provider,
    ProviderError,
    RetryNotice,
    StreamDelta,
    SystemBlock,
)

__all__ = [
    "ContextLimitExceeded",
    "ModelRequest",
    "ModelResponse",
    "Provider",
    "ProviderError",
    "RetryNotice",
    "StreamDelta",
    "SystemBlock",
]
