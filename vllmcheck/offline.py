"""A pytest plugin (`-p vllmcheck.offline`) for the release's own tests: in a
test module that has its own offline stand-in `_StubModelConfig`, the
module's `ModelConfig(model=..., **options)` builds that stand-in instead
(no model hub), its multimodal config made of the multimodal options given,
and `VllmConfig(model_config=stand_in)` the plain namespace the file's own
offline test passes (`parallel_config.world_size` 1, the model config).
Each test that used it says so in its report (a user property `stand-in`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from types import ModuleType, SimpleNamespace
from typing import Any

import pytest

STUB = "_StubModelConfig"


def offline_classes(module: ModuleType, used: list[str]) -> tuple[type, Callable[..., Any]]:
    """The replacements of `module`'s ModelConfig and VllmConfig; `used`
    gets a line each time the stand-in is built."""
    stub: Any = getattr(module, STUB)
    config_cls: Any = module.MultiModalConfig
    options = {field.name for field in dataclasses.fields(config_cls)}
    real_vllm_config = module.VllmConfig

    class OfflineModelConfig(stub):  # type: ignore[misc]
        """The file's stand-in, with every multimodal option that was asked for."""

        def __init__(self, *_args: Any, **kwargs: Any) -> None:
            config = config_cls(**{k: v for k, v in kwargs.items() if k in options})
            super().__init__(mm_processor_cache_gb=config.mm_processor_cache_gb)
            self.offline_config = config
            used.append(f"ModelConfig({kwargs.get('model', '')!r}) -> {STUB}")

        def get_multimodal_config(self) -> Any:
            """The multimodal config made of the options given."""
            return self.offline_config

    def vllm_config(*args: Any, **kwargs: Any) -> Any:
        model_config = kwargs.get("model_config")
        if isinstance(model_config, OfflineModelConfig) and not args and len(kwargs) == 1:
            return SimpleNamespace(
                parallel_config=SimpleNamespace(world_size=1), model_config=model_config
            )
        return real_vllm_config(*args, **kwargs)

    return OfflineModelConfig, vllm_config


@pytest.fixture(autouse=True)
def _vllmcheck_offline_model_config(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> Iterator[None]:
    module = getattr(request.node, "module", None)
    if module is None or not all(
        hasattr(module, name) for name in (STUB, "ModelConfig", "VllmConfig", "MultiModalConfig")
    ):
        yield
        return
    used: list[str] = []
    model_config, vllm_config = offline_classes(module, used)
    monkeypatch.setattr(module, "ModelConfig", model_config)
    monkeypatch.setattr(module, "VllmConfig", vllm_config)
    yield
    if used:
        request.node.user_properties.append(("stand-in", "; ".join(sorted(set(used)))))
