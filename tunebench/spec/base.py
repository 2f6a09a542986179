"""The base of every spec model: unknown keys are errors, values are frozen."""

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    """A spec section. Forbidding unknown keys turns a typo into an error that names the key
    instead of a setting that silently does nothing."""

    model_config = ConfigDict(extra="forbid", frozen=True)
