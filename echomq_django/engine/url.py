"""Server URLs: refused when they would connect elsewhere than they say, shown masked.

A URL holds the password. ``validate_url`` refuses one a parser would split in
the wrong place (and whose errors would then print pieces of the password);
``mask_url`` is the only form a URL is ever shown in: logs, checks, pages, errors.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from redis.connection import parse_url

from .errors import InvalidURL

# A cluster's URL schemes, and the plain scheme each one's nodes are reached by.
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
URL_SCHEMES = {"redis", "rediss", "unix", *CLUSTER_SCHEMES}


def mask_url(url: str) -> str:
    """The URL with its passwords replaced by ``***``: safe for logs, pages and errors.

    Both places redis-py reads a password from are masked: the userinfo
    (``redis://user:pw@host``) and the query (``?password=pw``). It holds for a
    password with unquoted ``#``, ``/``, ``?``, ``@`` or ``:`` too, which URL
    parsers split in the wrong place: everything from the first ``:`` of the
    userinfo to the *last* ``@`` of the URL is masked, and everything after a
    ``password=``. The rest is kept verbatim (an IPv6 host keeps its brackets).
    """
    scheme, sep, rest = url.partition("://")
    if not sep:
        return "***" if ("@" in url or "password" in url.lower()) else url
    hidden: list[tuple[int, int]] = []  # spans of ``rest`` to mask
    at = rest.rfind("@")
    colon = rest.find(":", 0, at)
    if at >= 0 and colon >= 0:
        hidden.append((colon + 1, at))
    for match in _PASSWORD_PARAM.finditer(rest):
        hidden.append((match.end(), len(rest)))  # up to the end: '&' or '#' may be in it
    merged: list[list[int]] = []
    for start, end in sorted(hidden):
        if merged and start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], end)
        else:
            merged.append([start, end])
    for start, end in reversed(merged):
        rest = rest[:start] + "***" + rest[end:]
    return f"{scheme}://{rest}"


_PASSWORD_PARAM = re.compile(r"[?&]password=", re.IGNORECASE)


def validate_url(url: object) -> str:
    """Refuse a URL that would connect somewhere else than it says, or not at all.

    Without a host redis-py quietly connects to localhost:6379; with an unquoted
    ``#``, ``/``, ``?`` or ``@`` in the password it parses part of the password as
    the host, the port or the path, and its errors then print that part. Neither
    is ever echoed here: the URL holds the secret.
    """
    if not isinstance(url, str):
        raise InvalidURL(f"the server URL must be a string, not {type(url).__name__}")
    hint = "percent-quote '@', '/', ':', '?', '#' and '%' in a user name or password"
    try:
        parts = urlsplit(url)
    except ValueError:  # e.g. an unquoted '[' in the password reads as an IPv6 host
        raise InvalidURL(f"the server URL cannot be parsed; {hint}") from None
    if parts.scheme not in URL_SCHEMES:
        raise InvalidURL(f"its scheme is not one of {', '.join(sorted(URL_SCHEMES))}")
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError:
        raise InvalidURL(f"the {parts.scheme or 'server'} URL has no valid port; {hint}") from None
    if parts.fragment or "#" in url or "@" in parts.path + parts.query:
        raise InvalidURL(f"the {parts.scheme or 'server'} URL has text after its host; {hint}")
    if not (parts.path if parts.scheme == "unix" else parts.hostname):
        raise InvalidURL(
            f"the {parts.scheme or 'server'} URL names no host (or socket path); {hint}"
        )
    plain = CLUSTER_SCHEMES.get(parts.scheme, parts.scheme)
    try:  # redis-py's own reading of its options (?socket_timeout=, ?db=...)
        parse_url(url.replace(parts.scheme, plain, 1) if plain != parts.scheme else url)
    except ValueError as exc:  # its messages name the option, never a value
        raise InvalidURL(
            f"the {parts.scheme or 'server'} URL is refused by redis-py: {exc}"
        ) from None
    return url
