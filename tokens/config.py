"""The settings of the `tokenize` job, as one config: `--config FILE` and `--set key=value` like every command.

The flags `--source`, `--select COLUMN=CONDITION`, `--eod-token` and `--encoder` are aliases of these keys
(core.cli.load_settings: a given flag wins over the file and `--set`). Nothing here decides more than
the flags did: `run_tokenize` takes the same values, and the output's fingerprint is made from them as
before (tokens/job.py).
"""

from __future__ import annotations

from typing import Any

from pydantic import Field, model_validator

from core.config import ConfigModel, check_choice
from tokens.tokenizer import ENCODERS

__all__ = ["TokenizeConfig"]


class TokenizeConfig(ConfigModel):
    """What `python -m tokens tokenize` reads besides its input, tokenizer and output."""

    source: str = "default"
    """Source name: the output's shards/<source> folder (a plain folder name)."""
    select: dict[str, Any] = Field(default_factory=dict)
    """Selectors, column -> condition (`lang: en`, `quality: ">= 0.6"`, `quality: "top 30%"`), the recipe's
    `select` syntax.
    A comparison given by `--set` is quoted, as in YAML: `--set 'select.quality=">= 0.6"'`."""
    eod_token: str | None = None
    """End-of-document token of a tokenizer.json not trained here (else its meta names it)."""
    encoder: str = "auto"
    """auto (tiktoken where it gives exactly the Hugging Face ids, else HF), tiktoken or hf."""
    allow_remove_all: bool = False
    """let a selection keep no document (refused otherwise: tokens/job.py check_selected); not part
    of the output's fingerprint, so a refused run finishes its folder with it set"""

    @model_validator(mode="after")
    def _check(self) -> TokenizeConfig:
        check_choice("encoder", self.encoder, ENCODERS)
        return self
