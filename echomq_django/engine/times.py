"""The server's clock as datetimes, and back: the one conversion.

Rows keep times as integers of the server clock: ``*_at`` in µs, ``*_ms`` and
``lease_deadline`` in ms. They are turned into datetimes exactly (integer
arithmetic on a timedelta, never a float of seconds, which rounds a 16-digit µs
count), and a value that is absent, planted text, or past what a datetime holds
(a due time of 2**52 ms) reads as None instead of failing a whole page. So does a
moment within a day of a datetime's ends (year 1, year 9999): it is stored, but a
page shows it in the project's zone and a terminal in its own, and that conversion
overflows (``showable``).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
US, MS = 1_000_000, 1_000  # a unit's count per second
_ONE_MS = timedelta(milliseconds=1)
# Every zone is less than a day from UTC: a moment between these converts to any of them.
_FIRST = datetime.min.replace(tzinfo=UTC) + timedelta(days=1)
_LAST = datetime.max.replace(tzinfo=UTC) - timedelta(days=1)


def showable(moment: datetime) -> datetime | None:
    """``moment`` when it can be shown in any time zone, else None (it is a day or less
    from a datetime's ends: ``|date`` or ``astimezone`` would raise OverflowError). A
    naive moment is taken as UTC for the check and returned as it is."""
    try:
        utc = moment.astimezone(UTC) if moment.tzinfo else moment.replace(tzinfo=UTC)
    except (OverflowError, ValueError):  # its own offset takes it past year 1 or 9999
        return None
    return moment if _FIRST <= utc <= _LAST else None


def from_server(value: object, per_second: int) -> datetime | None:
    """A server time in µs (``US``) or ms (``MS``) as an aware UTC datetime, or None."""
    if type(value) is not int:  # a row's times are ints: one check for them
        if isinstance(value, bool) or value is None or value == "":
            return None
        if not isinstance(value, int):
            try:
                value = int(str(value))
            except ValueError:
                return None
    try:  # positional: timedelta's keyword parsing costs a third of the conversion
        moment = EPOCH + timedelta(0, 0, value * (US // per_second))
    except OverflowError:
        return None
    return moment if _FIRST <= moment <= _LAST else None


def from_us(value: object) -> datetime | None:
    """A row's ``*_at`` field (server µs)."""
    return from_server(value, US)


def from_ms(value: object) -> datetime | None:
    """A row's ``*_ms`` field or ``lease_deadline`` (server ms)."""
    return from_server(value, MS)


def to_ms(moment: datetime) -> int:
    """Unix ms of an aware datetime (a due time as the scripts score it)."""
    return (moment - EPOCH) // _ONE_MS
