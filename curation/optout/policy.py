"""Opt-out policies as data: `configs/optout/<id>.yaml`, a dated list of robots.txt agents with its source.

    id: apertus-2025-01
    date: 2025-01-31          # the day the list stands for
    source: "..."             # where it comes from, so a reader can check it
    agents:                   # product tokens ([A-Za-z_-]+, RFC 9309 §2.2.1), or `*`
      - {token: GPTBot}
      - {token: "*"}

A page is removed when any listed agent is disallowed for its URL (curation/optout/stage.py); `*`
is queried as itself, what the `*` groups say. Tokens are compared case-insensitively, so two entries
equal after case folding are refused (ai.robots.txt lists `meta-externalagent` twice that way). The
file's sha256 goes into every audit row and stats.json: the run names the exact list it applied.

`training_tier(robots.json)` derives the training-crawler tier of ai.robots.txt (tests/curation/
test_optout_stage.py checks configs/optout/ai-robots-txt-train-2026-08.yaml against it): an agent is a
training crawler when its `function` says training, as `TRAINING` reads it; search, assistant, agent
and coding-agent entries, data providers and sellers are not (a site blocking ChatGPT-User refuses
live retrieval, not training: research §1.5). Its names are cut to the product token that RFC 9309
matching compares (`Kangaroo Bot` is matched as `Kangaroo`).
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import date
from pathlib import Path
from typing import Any

from pydantic import model_validator

from core.config import ConfigModel, load_config
from core.errors import ConfigError
from curation.optout.robots import product_token

__all__ = ["TRAINING", "AgentEntry", "Policy", "load_policy", "training_tier"]

_ID = re.compile(r"[a-z0-9][a-z0-9._-]{0,63}")
_LEADING_TOKEN = re.compile(r"[A-Za-z_-]+")
TRAINING = re.compile(
    r"\btrain(s|ed|ing)?\b|\bLLMs?\b|language models|data ?sets?\b|machine learning (models|experiments|research)",
    re.IGNORECASE,
)
"""What in ai.robots.txt's free-text `function` means a training crawler ("Scrapes data to train
OpenAI's products.", "LLM training.", "Provides open crawl dataset, ...")."""
TRAINING_CATEGORIES = frozenset(("ai data scrapers", "ai data scraper"))
"""ai.robots.txt's category for crawlers that gather data for AI (cohere-training-data-crawler, PanguBot)."""


class AgentEntry(ConfigModel):
    token: str
    """The product token queried (`GPTBot`), or `*`."""
    name: str | None = None
    """The agent as the source writes it, when that is not its token: `AI2Bot` is queried as `AI`,
    since RFC 9309 / Google matching cuts a group's value at its first character outside
    `[A-Za-z_-]` (`User-agent: AI2Bot` is a group for `ai`), and `Kangaroo Bot` as `Kangaroo`.
    Reasons and audit rows name the agent by `label` (this name, else the token)."""
    operator: str | None = None
    function: str | None = None
    """The source's words for what it does (ai.robots.txt `function`): why it is on the list."""

    def check(self, key: str) -> None:
        """The token is one (or `*`), and what matching makes of `name`; ConfigError naming `key`."""
        try:
            product_token(self.token)
        except ValueError as e:
            raise ConfigError(f"{key}.token: {e}") from None
        if self.name is not None:
            cut = _LEADING_TOKEN.match(self.name)
            if cut is None or cut[0].lower() != self.token.lower():
                raise ConfigError(
                    f"{key}.token {self.token!r} is not what matching makes of name {self.name!r} "
                    f"({cut[0] if cut else 'nothing'!r}: its leading [A-Za-z_-] characters)"
                )

    @property
    def label(self) -> str:
        return self.name or self.token


class Policy(ConfigModel):
    """One dated agent list (module doc)."""

    id: str
    """Names the list in every output (`robots:<agent>` reasons do not say which list)."""
    date: date
    source: str
    """Where the list comes from: a paper, a file at a commit."""
    agents: tuple[AgentEntry, ...]
    notes: str = ""

    @model_validator(mode="after")
    def _check(self) -> Any:
        if not _ID.fullmatch(self.id):
            raise ConfigError(f"id must be lower-case letters, digits, '.', '_' or '-', got {self.id!r}")
        if not self.source.strip():
            raise ConfigError("source must say where the list comes from")
        if not self.agents:
            raise ConfigError("agents: the list is empty")
        seen: dict[str, int] = {}
        for i, a in enumerate(self.agents):
            a.check(f"agents[{i}]")
            folded = a.token.lower()
            if folded in seen:
                raise ConfigError(
                    f"agents[{i}].token {a.token!r} is agents[{seen[folded]}] again (tokens match "
                    "case-insensitively); list it once"
                )
            seen[folded] = i
        return self

    def queries(self) -> tuple[tuple[str, str], ...]:
        """(token queried, label in reasons) per agent, in list order."""
        return tuple((a.token, a.label) for a in self.agents)


def load_policy(path: str | Path) -> tuple[Policy, str]:
    """The policy at `path` and the sha256 of its bytes; ConfigError names the file and the key."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"policy {path}: no such file")
    return load_config(Policy, p), hashlib.sha256(p.read_bytes()).hexdigest()


def training_tier(robots_json: str | Path) -> list[dict[str, str]]:
    """The training crawlers of an ai.robots.txt `robots.json` (module doc), in its order, one per
    token after case folding: `{token, name, operator, function}` (`name` only when not the token)."""
    data = json.loads(Path(robots_json).read_text(encoding="utf-8"))
    out: dict[str, dict[str, str]] = {}
    for name, entry in data.items():
        function = str(entry.get("function", ""))
        if function.strip().lower() not in TRAINING_CATEGORIES and not TRAINING.search(function):
            continue
        m = _LEADING_TOKEN.match(name)
        if m is None or m[0].lower() in out:
            continue  # no token to match (none today), or one listed already under another case
        row = {"token": m[0], "operator": _plain(entry.get("operator", "")), "function": function}
        if m[0] != name:
            row["name"] = name
        out[m[0].lower()] = row
    return list(out.values())


def _plain(text: str) -> str:
    """`[Ai2](https://allenai.org/crawler)` -> `Ai2`: the operator's name without its Markdown link."""
    return re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", str(text)).strip()
