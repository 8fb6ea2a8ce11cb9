"""Server URLs: refused when they would connect elsewhere than they say, shown masked.

A URL holds the password. ``validate_url`` refuses one a parser would split in
the wrong place (and whose errors would then print pieces of the password);
``mask_url`` is the only form a URL is ever shown in: logs, checks, pages, errors.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, quote, urlsplit

from redis.connection import parse_url

from .errors import InvalidURL

# A cluster's URL schemes, and the plain scheme each one's nodes are reached by.
CLUSTER_SCHEMES = {"redis+cluster": "redis", "rediss+cluster": "rediss"}
URL_SCHEMES = {"redis", "rediss", "unix", *CLUSTER_SCHEMES}

# The query parameters shown with their values: redis-py's URL_QUERY_ARGUMENT_PARSERS
# (numbers, flags, versions) and its two documented options that are names, not
# secrets. Any other parameter may be a password (a name redis-py passes through), and
# so is one a later redis-py adds: masked until it is listed here.
SHOWN_PARAMS = frozenset(
    {
        "db", "socket_timeout", "socket_connect_timeout", "socket_read_size",
        "socket_keepalive", "retry_on_timeout", "retry_on_error", "max_connections",
        "health_check_interval", "ssl_check_hostname", "ssl_include_verify_flags",
        "ssl_exclude_verify_flags", "ssl_min_version", "timeout", "protocol",
        "legacy_responses", "client_name", "ssl_cert_reqs", "ssl_validate_ocsp",
        "ssl_validate_ocsp_stapled",
    }
)  # fmt: skip


def mask_url(url: str) -> str:
    """The URL as it may be shown (logs, checks, pages, errors): every secret in it ``***``.

    redis-py reads a password from the userinfo (``redis://user:pw@host``) and
    from any query parameter: it percent-decodes the names (``?pass%77ord=pw``)
    and hands the ones it does not know to the connection (``?ssl_password=``).
    So the shown form is built from the parts, not from the text: the userinfo
    keeps its user name only, the query keeps the parameters of ``SHOWN_PARAMS``
    with their values, every other one is ``name=***``, and everything after it
    is ``***`` too: a raw ``&`` in a password makes its tail look like more
    parameters. A fragment is never sent, but may be the tail of a password cut
    at a raw ``#``: ``#***``. It holds for unquoted ``#``, ``/``, ``?``, ``@`` or
    ``:`` in a password, which URL parsers split in the wrong place: the userinfo
    runs to the *last* ``@`` of the URL, and when a ``/``, ``?`` or ``#`` comes
    before that ``@`` there is no telling where the password ends: all but the
    scheme is ``***``. Text that is no URL is ``***`` whole.
    """
    scheme, sep, rest = url.partition("://")
    if not sep or not re.fullmatch(r"[A-Za-z][A-Za-z0-9+.-]*", scheme):
        return "***"
    userinfo, at, rest = rest.rpartition("@")
    if re.search(r"[/?#]", userinfo):  # an '@' in a password, but in the userinfo or the query?
        return f"{scheme}://***"
    user, colon, _ = userinfo.partition(":")
    rest, hash_, _ = rest.partition("#")
    location, question, query = rest.partition("?")
    shown = f"{scheme}://{user}{colon and ':***'}{at}{location}"
    if question:
        shown += "?" + _masked_query(query)
    return shown + ("#***" if hash_ else "")


def _masked_query(query: str) -> str:
    """The query's parameters as ``mask_url`` shows them (see there)."""
    try:
        pairs = parse_qsl(query, keep_blank_values=True)  # as redis-py decodes them
    except ValueError:
        return "***"
    shown = []
    for number, (name, value) in enumerate(pairs):
        if name not in SHOWN_PARAMS:
            rest = "&***" if number + 1 < len(pairs) else ""
            shown.append(f"{quote(name, safe='', errors='backslashreplace')}=***{rest}")
            break
        shown.append(f"{name}={quote(value, safe=',', errors='backslashreplace')}")
    return "&".join(shown)


def database_number(url: str) -> int:
    """The db ``url`` selects: redis-py's own reading of it (0 for a cluster, which has
    db 0 only, and for a URL it cannot read)."""
    if urlsplit(url).scheme in CLUSTER_SCHEMES:
        return 0
    try:
        return int(parse_url(url).get("db") or 0)
    except (ValueError, TypeError):
        return 0


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
