"""Secrets for the PII scrubber (curation/pii/scrub.py): private keys, bearer tokens, AWS key ids.

- PEM private key blocks (RFC 7468 labels: "PRIVATE KEY", "RSA PRIVATE KEY", "OPENSSH PRIVATE
  KEY", ...), BEGIN to END, or to the end of the base64 lines when the END marker is missing;
- bearer tokens (RFC 6750 b64token syntax, 16+ characters with a digit and a letter): only the
  token is replaced, so "Authorization: Bearer <SECRET>" stays readable;
- AWS access key ids (IAM user guide: "AKIA" long-term, "ASIA" temporary, 20 characters).
The PEM search remembers the next END marker, so many BEGIN markers without an END do not each
rescan the rest of the text.
"""

from __future__ import annotations

import re
from typing import Final

# ASCII patterns: `\d` must not match Arabic-Indic or full-width digits that no check here
# understands, and `\w` means [A-Za-z0-9_] (curation/pii/scrub.py).
_A = re.ASCII

# AWS access key ids: "AKIA" (long-term) or "ASIA" (STS temporary) + 16 upper-case alphanumerics.
_AWS_KEY = re.compile(r"A(?<![A-Za-z0-9]A)(?:KIA|SIA)[A-Z0-9]{16}(?![A-Za-z0-9])", _A)
# RFC 6750 bearer credentials: the scheme is case-insensitive; the token is b64token characters.
# Only the token is replaced ("Authorization: Bearer <SECRET>" stays readable). 16+ characters
# and, checked below, a digit and a letter: "bearer of this letter" is prose, not a credential.
_BEARER = re.compile(
    r"[Bb](?<![A-Za-z0-9._~+/=\-][Bb])(?i:earer)[ \t]{1,8}+(?P<token>[A-Za-z0-9._~+/=\-]{16,8192}+)",
    _A,
)
# RFC 7468 labels: "PRIVATE KEY", "RSA PRIVATE KEY", "ENCRYPTED PRIVATE KEY", "OPENSSH PRIVATE
# KEY", "PGP PRIVATE KEY BLOCK" ... The label repeat is bounded (40), so it backtracks at most 40
# steps per literal "-----BEGIN " occurrence.
_PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", _A)
_PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----", _A)
# Base64 lines of a block whose END marker is missing (truncated page): replace what is there,
# up to the first blank line and without a last line that prose cut short ("\nNext paragraph").
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=\r\n]{0,65536}+", _A)
PEM_MAX_CHARS: Final = 65536
"""A BEGIN marker pairs with the next END marker at most this far away (16k-bit RSA: ~13k chars)."""


def _find_pem_blocks(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    if "PRIVATE KEY" not in text:
        return found
    next_end: re.Match[str] | None = None
    end_searched_from = -1
    covered = 0
    for begin in _PEM_BEGIN.finditer(text):
        if begin.start() < covered:
            continue  # inside the previous block
        # Memoised END search: recompute only once we are past the END found last time, so N
        # BEGIN markers without an END cost one scan of the text, not N (quadratic) scans.
        if end_searched_from < 0 or (next_end is not None and next_end.start() < begin.end()):
            next_end = _PEM_END.search(text, begin.end())
            end_searched_from = begin.end()
        if next_end is not None and next_end.start() - begin.end() <= PEM_MAX_CHARS:
            covered = next_end.end()
        else:
            body = _PEM_BODY.match(text, begin.end()).group()  # always matches (min 0)
            blanks = [i for i in (body.find("\n\n"), body.find("\n\r\n")) if i >= 0]
            if blanks:
                body = body[: min(blanks)]
            elif begin.end() + len(body) < len(text) and not body.endswith("\n"):
                body = body[: body.rfind("\n") + 1]  # the run stopped inside a non-base64 line
            covered = begin.end() + len(body.rstrip())
        found.append((begin.start(), covered))
    return found


def find_secrets(text: str) -> list[tuple[int, int]]:
    found = _find_pem_blocks(text)
    if "AKIA" in text or "ASIA" in text:
        found.extend(m.span() for m in _AWS_KEY.finditer(text))
    for m in _BEARER.finditer(text):
        token = m["token"].rstrip(".")  # "... Bearer abc123def456ghi789." ends a sentence
        if len(token) >= 16 and any(c.isdigit() for c in token) and any(c.isalpha() for c in token):
            found.append((m.start("token"), m.start("token") + len(token)))
    # Secrets of different kinds may overlap (a bearer token pasted inside a PEM block); the
    # generic resolution in `scrub` keeps the outermost, leftmost one.
    found.sort()
    return found


PATTERNS: Final[dict[str, re.Pattern[str]]] = {
    "aws_key": _AWS_KEY,
    "bearer": _BEARER,
    "pem_begin": _PEM_BEGIN,
    "pem_end": _PEM_END,
    "pem_body": _PEM_BODY,
}
