"""The one validator of each kind of caller input: checked before anything is sent.

Every engine entry point checks its arguments with these, so a bad value is the
same typed ``InvalidJobOptions`` with the same wording wherever it is passed.
"""

from __future__ import annotations

from .bounds import ERROR_MAX_BYTES, MAX_TOKEN
from .error_record import ErrorRecord
from .errors import InvalidJobOptions
from .json_text import read_json


def check_int(
    value: object,
    minimum: int,
    maximum: int,
    name: str,
    error: type[ValueError] = InvalidJobOptions,
) -> int:
    """``value`` if it is an int (not a bool) within ``minimum..maximum``; else ``error``
    (the typed error of the caller's kind of input: every engine error of bad input is
    a ValueError)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise error(f"{name} must be an integer, not {type(value).__name__}")
    if not minimum <= value <= maximum:
        raise error(f"{name} must be between {minimum} and {maximum}, not {value}")
    return value


def check_token(token: object) -> int:
    """``token`` if it can be a lease's token (an int, as claim handed it out). Never
    ``int(token)``: that truncates 2.5 or reads "2" into the holder's token 2."""
    return check_int(token, 1, MAX_TOKEN, "token")


def one_line(value: object, name: str, limit: int) -> str:
    """``value`` if it is one printable line a script may splice into a reply or a key."""
    if not isinstance(value, str):
        raise InvalidJobOptions(f"{name} must be a string, not {type(value).__name__}")
    # isprintable() is False for CR and LF: only quotes and backslashes need a look of their own.
    if len(value) > limit or '"' in value or "\\" in value or not value.isprintable():
        raise InvalidJobOptions(
            f"{name} must be one printable line without quotes or backslashes, "
            f"at most {limit} characters"
        )
    return value


def utf8(value: str, name: str) -> bytes:
    """``value`` as the bytes the server will hold; a lone surrogate is bad input, not a crash."""
    try:
        return value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidJobOptions(
            f"{name} is not valid Unicode text: lone surrogate at position {exc.start}"
        ) from None


def error_object(error: object) -> str:
    """``error`` if it is one JSON object: Lua splices it as is into the row's errors array."""
    if isinstance(error, str) and len(error) > ERROR_MAX_BYTES:
        raise InvalidJobOptions(
            f"error is {len(error)} characters, over the limit of {ERROR_MAX_BYTES}"
        )
    if isinstance(error, ErrorRecord):  # one JSON object by construction: no parse
        return error
    try:
        ok = isinstance(error, str) and isinstance(read_json(error), dict)
    except ValueError:
        ok = False
    if not ok or not isinstance(error, str):
        raise InvalidJobOptions('error must be one JSON object, e.g. {"exception_class_path": ...}')
    return error
