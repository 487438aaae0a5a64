"""Settings from ``WORKBENCH_*`` variables, read by pydantic-settings.

Imported only when a variable names a setting: pydantic-settings and its sources take 50-80 ms to import,
a tenth of the time the workbench needs to show a session, and most starts set no such variable.
"""

from __future__ import annotations

from functools import cache
from typing import Any, TypeVar, cast

from pydantic import BaseModel, create_model
from pydantic_settings import BaseSettings, SettingsError

from workbench.engine.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def with_environment(model: type[M], data: dict[str, Any], prefix: str, delimiter: str) -> M:
    """``model(**data)``, the variables filling what ``data`` leaves out (``PREFIX_SECTION__KEY=value``, a section
    as JSON). A variable pydantic-settings cannot read is a one-line :class:`ConfigError`; a value the model
    refuses is pydantic's ``ValidationError``, as from ``model(**data)``."""
    try:
        read = _reading(model)(**data, _env_prefix=prefix, _env_nested_delimiter=delimiter)
    except SettingsError as exc:  # a variable holding a section that is not JSON
        raise ConfigError(f"environment ({prefix}* variables): {' '.join(str(exc).split())}") from exc
    return model(**{name: getattr(read, name) for name in read.model_fields_set})  # the model's own class


@cache
def _reading(model: type[BaseModel]) -> type[BaseSettings]:
    """``model`` as settings: its fields and checks, filled from the environment."""
    return cast(type[BaseSettings], create_model(f"{model.__name__}FromEnvironment", __base__=(model, BaseSettings)))
