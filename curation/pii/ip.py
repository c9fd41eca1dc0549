"""Public IPv4 and IPv6 addresses for the PII scrubber (curation/pii/scrub.py), in linear time.

Only addresses that `ipaddress` calls `is_global`, and not multicast, are personal data: RFC 6890's
special-purpose ranges (private, loopback, link-local, documentation, CGNAT, ...) identify no one.
IPv4 is answered from an interval table built from `ipaddress` at import (exactly the stdlib's
answer, without its 3-12 us per address); IPv6 by the stdlib, memoised in a bounded dict.
"""

from __future__ import annotations

import ipaddress
import re
import string
from bisect import bisect_right
from typing import Final

from curation.pii.boundary import digit_before, glued_after

# ASCII patterns: `\d` must not match Arabic-Indic or full-width digits that no check here
# understands, and `\w` means [A-Za-z0-9_] (curation/pii/scrub.py).
_A = re.ASCII

# Dotted quad, not glued to a word, another dot-number (versions, OIDs) or a preceding digit.
# The quantifiers are spelled out four times rather than repeating a group (rule 1).
# The lookbehind sits after the first digit so the pattern starts with a character class, which
# `re` scans for at C speed instead of trying every position (4x faster on prose).
_IPV4 = re.compile(
    r"\d(?<![\w.]\d)\d{0,2}+\.\d{1,3}+\.\d{1,3}+\.\d{1,3}+(?!\w|\.\d)",
    _A,
)
# IPv6 text forms (RFC 4291 2.2, RFC 5952) are at most 45 characters of hex, ':' and '.'
# (embedded IPv4). They are found from a ':' followed by hex or ':' (`_IPV6_HINT`, a literal-first
# scan that also takes the run of hex, ":" and "." after it); the start is at most 4 hex digits
# before the colon. The lookahead demands a colon within the first 5 characters so words of hex
# letters ("decade") fail at once; `_is_public` parses.
_IPV6_HINT = re.compile(r":(?=[0-9A-Fa-f:])[0-9A-Fa-f:.]*+", _A)
_HEX_CHARS: Final = frozenset(string.hexdigits)
_IPV6 = re.compile(
    r"(?<![\w:.])(?=[0-9A-Fa-f]{0,4}+:)[0-9A-Fa-f:.]{2,45}+(?![\w:])",
    _A,
)


# Deciding "public" is the costly part of IP matching: `ipaddress.ip_address(s).is_global` takes
# 3-8 us to parse and ~12 us to test an address it has not seen (it walks its list of
# special-purpose networks), so 1 MB of "10.0.0.1 " or "::1 " took 1-4.6 s (issue 17). Both checks
# below give exactly the stdlib's answer, cheaply:
# - IPv4: the octets are parsed here (the regex guarantees 4 groups of 1-3 ASCII digits) and the
#   32-bit integer is looked up in an interval table whose answers come from `ipaddress` itself.
# - IPv6 (and anything else): the stdlib, memoised per candidate string in a bounded dict, since
#   hostile or repetitive text repeats the same few candidates.

# Every special-purpose IPv4 block that a Python 3.11 release lists (IANA IPv4 Special-Purpose
# Address Registry, RFC 6890 and updates; the 192.0.0.0/24 entries changed in a 3.11 patch
# release, CVE-2024-4032), plus multicast. Only their boundaries are taken from here: the answer
# on each interval between consecutive boundaries is asked of `ipaddress` once, at import. A
# stdlib whose networks all start and end on these boundaries is reproduced exactly (tests
# compare on every boundary +-3, on all of 192.0.0.0/24 and on random addresses).
_IPV4_SPECIAL_BLOCKS: Final = (
    "0.0.0.0/8", "10.0.0.0/8", "100.64.0.0/10", "127.0.0.0/8", "169.254.0.0/16", "172.16.0.0/12",
    "192.0.0.0/24", "192.0.0.0/29", "192.0.0.8/32", "192.0.0.9/32", "192.0.0.10/32",
    "192.0.0.170/31", "192.0.0.171/32", "192.0.2.0/24", "192.31.196.0/24", "192.52.193.0/24",
    "192.88.99.0/24", "192.88.99.2/32", "192.168.0.0/16", "192.175.48.0/24", "198.18.0.0/15",
    "198.51.100.0/24", "203.0.113.0/24", "224.0.0.0/4", "240.0.0.0/4", "255.255.255.255/32",
)  # fmt: skip


def _stdlib_is_public(ip: ipaddress.IPv4Address | ipaddress.IPv6Address) -> bool:
    # is_global excludes RFC 6890 special-purpose ranges (private, loopback, link-local,
    # documentation, CGNAT, ...). Multicast groups identify no host, so they are kept too.
    return ip.is_global and not ip.is_multicast


def _ipv4_intervals() -> tuple[list[int], list[bool]]:
    """(interval starts, whether the addresses of each interval are public), from `ipaddress`."""
    bounds = {0}
    for block in _IPV4_SPECIAL_BLOCKS:
        net = ipaddress.IPv4Network(block)
        bounds.add(int(net.network_address))
        bounds.add(int(net.broadcast_address) + 1)
    starts = sorted(b for b in bounds if b < 2**32)
    return starts, [_stdlib_is_public(ipaddress.IPv4Address(b)) for b in starts]


_IPV4_STARTS, _IPV4_PUBLIC = _ipv4_intervals()
_IP_CACHE_MAX: Final = 4096
_ip_cache: dict[str, bool] = {}


def _is_public_ipv4(octets: list[str]) -> bool:
    """Public per `ipaddress` for four 1-3 digit groups; like the stdlib, refuses leading zeros."""
    value = 0
    for octet in octets:
        if len(octet) > 1 and octet[0] == "0":
            return False  # "01.02.03.04": ipaddress raises (ambiguous octal), so not an address
        n = int(octet)
        if n > 255:
            return False
        value = value << 8 | n
    return _IPV4_PUBLIC[bisect_right(_IPV4_STARTS, value) - 1]


def _is_public(address: str) -> bool:
    """Whether an IPv4 candidate of `_IPV4` or an IPv6 candidate is a public address."""
    known = _ip_cache.get(address)
    if known is not None:
        return known
    if ":" not in address:
        public = _is_public_ipv4(address.split("."))
    else:
        try:
            public = _stdlib_is_public(ipaddress.ip_address(address))
        except ValueError:
            public = False
    if len(_ip_cache) >= _IP_CACHE_MAX:
        _ip_cache.clear()  # bounded memory; the next repeats refill it at once
    _ip_cache[address] = public
    return public


def find_ips(text: str) -> list[tuple[int, int]]:
    found: list[tuple[int, int]] = []
    if "." in text:
        # The ASCII lookarounds cannot see other scripts' digits ("8.8.8.8٣"): boundary.py.
        found.extend(
            m.span()
            for m in _IPV4.finditer(text)
            if _is_public(m.group()) and not (digit_before(text, m.start()) or glued_after(text, m.end()))
        )
    # One C call per run: the hint ':' and the whole run of hex/':'/'.' after it. No address can
    # start inside that run (the lookbehind refuses), so finditer resuming after the run, whatever
    # the outcome, misses none: each run is scanned once.
    for run in _IPV6_HINT.finditer(text):
        colon = start = run.start()
        while start > colon - 4 and start > 0 and text[start - 1] in _HEX_CHARS:
            start -= 1
        m = _IPV6.match(text, start)
        if m is not None:
            stripped = m.group().rstrip(".")  # "... from 2001:4860::8888." ends a sentence
            end = start + len(stripped)
            if digit_before(text, start) or glued_after(text, end):
                continue
            if stripped.count(":") >= 2 and _is_public(stripped):
                found.append((start, end))
    # The families interleave and may even overlap (NAT64 "64:ff9b::8.8.8.8" holds a public
    # IPv4 address); scrub's `find_pii` resolves that like any other overlap.
    found.sort()
    return found


PATTERNS: Final[dict[str, re.Pattern[str]]] = {"ipv4": _IPV4, "ipv6_hint": _IPV6_HINT, "ipv6": _IPV6}
