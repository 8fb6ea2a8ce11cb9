"""The payload the backend writes into a job's row: one JSON object, opaque to the
engine and to Lua::

    {"v": 1, "task": "app.tasks.send_mail", "args": [...], "kwargs": {...},
     "backend": "default", "takes_context": false, "idempotency_key": "..."}

Priority, queue, run_after (its exact ISO text) and every timestamp live in the
row itself, where the engine keeps them. Arguments are stored as JSON, never
pickled; ``encode_arguments`` refuses one that has no JSON form before anything
is sent. What a row's task path may run: :mod:`echomq_django.discovery`; the row
read back as a TaskResult: :mod:`echomq_django.results`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .compat import normalize_json
from .engine.json_text import read_json
from .exceptions import InvalidTaskArguments, PayloadError

VERSION = 1

# Built once: json.dumps with any option builds a new encoder per call.
PAYLOAD_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, allow_nan=False)
VALUE_ENCODER = json.JSONEncoder(allow_nan=False)  # json.dumps(value, allow_nan=False)


@dataclass(slots=True)
class Payload:
    """A row's payload, read. Not ``frozen``: a frozen dataclass sets each field through
    ``object.__setattr__``, and a worker reads one for every job it runs."""

    task: str
    args: list[Any]
    kwargs: dict[str, Any]
    backend: str
    takes_context: bool = False
    idempotency_key: str | None = None
    metadata: dict[str, str] | None = None  # the enqueuer's trace context (tracing.py)

    def dumps(self) -> str:
        template = PayloadTemplate.of(
            self.task, self.backend, self.takes_context, self.idempotency_key
        )
        return template.render(self.args, self.kwargs, self.metadata)

    @classmethod
    def loads(cls, text: str) -> Payload:
        """Parse and type-check a stored payload; ``PayloadError`` says what is wrong."""
        try:
            data = read_json(text)
        except ValueError as exc:
            raise PayloadError(f"the payload is not JSON: {exc}") from None
        if not isinstance(data, dict) or data.get("v") != VERSION:
            raise PayloadError(f"the payload is not a version {VERSION} EchoMQ task payload")
        check_fields(data)
        if json_deeper(text, data, MAX_NESTING + 2):  # an argument, in "args", in the object
            raise PayloadError(f"the payload's arguments are nested more than {MAX_NESTING} deep")
        return cls(
            task=data["task"],
            args=data.get("args", []),
            kwargs=data.get("kwargs", {}),
            backend=data["backend"],
            takes_context=data.get("takes_context", False),
            idempotency_key=data.get("idempotency_key"),
            metadata=data.get("metadata"),
        )


@dataclass(frozen=True, slots=True)
class PayloadTemplate:
    """The one writer of a payload's text: the JSON object, key by key in a fixed order.

    The parts that are the same for every enqueue of one Task (its path, backend,
    context flag, idempotency key) are encoded once, into ``head`` (up to the
    arguments) and ``tail``; a call encodes only its arguments and trace context.
    The text is what ``PAYLOAD_ENCODER`` writes for the whole object, byte for byte.
    """

    head: str
    tail: str

    @classmethod
    def of(
        cls, task: str, backend: str, takes_context: bool, idempotency_key: str | None
    ) -> PayloadTemplate:
        encode = PAYLOAD_ENCODER.encode
        tail = f',"backend":{encode(backend)},"takes_context":{encode(takes_context)}'
        if idempotency_key is not None:
            tail += f',"idempotency_key":{encode(idempotency_key)}'
        return cls(f'{{"v":{VERSION},"task":{encode(task)},"args":', tail)

    def render(
        self, args: list[Any], kwargs: dict[str, Any], metadata: dict[str, str] | None = None
    ) -> str:
        """The payload of one call (``args`` and ``kwargs`` as ``encode_arguments`` gave them)."""
        encode = PAYLOAD_ENCODER.encode
        text = (
            f"{self.head}{encode(args) if args else '[]'},"
            f'"kwargs":{encode(kwargs) if kwargs else "{}"}{self.tail}'
        )
        return f'{text},"metadata":{encode(metadata)}}}' if metadata else text + "}"


PAYLOAD_FIELDS: dict[str, type | tuple[type, ...]] = {
    "task": str,
    "args": list,
    "kwargs": dict,
    "backend": str,
    "takes_context": bool,
    "idempotency_key": (str, type(None)),
    "metadata": (dict, type(None)),
}


def check_fields(data: dict[str, Any]) -> None:
    """Raise the ``PayloadError`` naming the first field of ``data`` that is wrong."""
    for name, kind in PAYLOAD_FIELDS.items():
        if name in data and not isinstance(data[name], kind):
            raise PayloadError(f"the payload's {name!r} has the wrong type")
    if not data.get("task") or not data.get("backend"):
        raise PayloadError("the payload names no task or no backend")


# How deep containers may nest in one argument or return value (``[[1]]`` is 2 deep).
# Django's normalize_json, which every TaskResult runs on its arguments, recurses once
# or twice per level: near Python's recursion limit (1,000) a value it took at enqueue
# fails on a reader whose stack is deeper (a view, a worker thread). 100 levels is
# deeper than any real document and leaves every reader most of its stack.
MAX_NESTING = 100


def nested_deeper(value: Any, limit: int = MAX_NESTING) -> bool:
    """True when ``value`` has containers (mappings, lists, tuples) nested more than
    ``limit`` deep, or refers to itself. Iterative: it cannot exhaust the stack."""
    stack = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, Mapping):
            children: Iterable[Any] = item.values()
        elif isinstance(item, (list, tuple)):
            children = item
        else:
            continue
        if depth == limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def json_deeper(text: str, value: Any, limit: int) -> bool:
    """``nested_deeper`` for ``value`` read from ``text``: its count of brackets bounds its
    depth, so most values need no walk."""
    return text.count("[") + text.count("{") > limit and nested_deeper(value, limit)


def read_back(text: str, encoder: json.JSONEncoder, limit: int = MAX_NESTING) -> Any:
    """``text`` (what ``encoder`` wrote) as storage gives it back; ``ValueError`` when
    that is not what was written: nested deeper than ``limit``, or two dict keys that
    JSON makes the same text (``1``/``"1"``, ``True``/``"true"``, ``None``/``"null"``),
    of which reading keeps only the last. Writing the value read back gives ``text``
    again exactly when nothing was lost."""
    value = read_json(text)
    if json_deeper(text, value, limit):
        raise ValueError(f"it is nested more than {limit} deep")
    if encoder.encode(value) != text:
        raise ValueError("two of its dict keys are the same as JSON text (such as 1 and '1')")
    return value


def storable(value: Any, encoder: json.JSONEncoder) -> tuple[str, Any]:
    """``value`` normalised as Django does, written by ``encoder``, and read back.

    ``TypeError``/``ValueError`` saying why when it cannot be stored as it is (see
    ``read_back``). normalize_json recurses: a value nested past the stack is too deep.
    """
    try:
        text = encoder.encode(normalize_json(value))
    except RecursionError:
        raise ValueError(f"it is nested more than {MAX_NESTING} deep") from None
    return text, read_back(text, encoder)


def check_unicode(text: str, value: Any) -> None:
    """``ValueError`` when ``value`` (written as ``text``, ASCII) holds a lone surrogate.

    The payload is UTF-8 text, which cannot hold one: the engine would refuse the whole
    payload, without saying which argument. An escaped surrogate in ``text`` is most
    often half of a pair (an emoji): only then is the value written again to find out."""
    if "\\ud" not in text:
        return
    try:
        PAYLOAD_ENCODER.encode(value).encode()
    except UnicodeEncodeError as exc:
        lone = exc.object[exc.start : exc.end]
        raise ValueError(f"it contains a lone surrogate ({lone!r}), not UTF-8 text") from None


def to_json_value(value: Any, what: str) -> Any:
    """``value`` as it will come back from storage (tuples -> lists, int keys -> str).

    Raises ``InvalidTaskArguments`` naming ``what`` when the value has no JSON form, or
    would not come back as it was written (``read_back``, ``check_unicode``).
    """
    try:
        text, stored = storable(value, VALUE_ENCODER)
        check_unicode(text, stored)
    except (TypeError, ValueError) as exc:
        raise InvalidTaskArguments(
            f"{what} cannot be stored as JSON ({type(value).__name__}): {exc}"
        ) from None
    return stored


def encode_arguments(
    args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[list[Any], dict[str, Any]]:
    """Normalise args/kwargs the way Django does, checking each one before anything is sent.

    The common case is one pass through JSON for all values, without normalize_json:
    whatever the encoder accepts (dict, list, tuple, str, int, float, bool, None and
    their subclasses), normalize_json would pass on for it to encode the same way.
    Anything else (bytes, other mappings or sequences, a bad value, a keyword that is
    not ASCII) takes the long way, one value at a time, so that the error names the
    argument.
    """
    if not args and not kwargs:
        return [], {}
    if not all(isinstance(name, str) and name.isascii() for name in kwargs):  # keyword()
        return encode_each(args, kwargs)
    try:
        text = VALUE_ENCODER.encode([*args, *kwargs.values()])
        values = read_back(text, VALUE_ENCODER, MAX_NESTING + 1)  # + the list of them all
        check_unicode(text, values)
    except Exception:
        return encode_each(args, kwargs)
    return values[: len(args)], dict(zip(kwargs, values[len(args) :], strict=True))


def encode_each(args: Sequence[Any], kwargs: Mapping[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """``encode_arguments`` one value at a time: the first that cannot be stored raises."""
    return (
        [to_json_value(value, f"positional argument {i}") for i, value in enumerate(args)],
        {
            keyword(name): to_json_value(value, f"keyword argument {name!r}")
            for name, value in kwargs.items()
        },
    )


def keyword(name: str) -> str:
    """A keyword argument's name, which the payload holds as UTF-8 text too: a ``str``
    (Python calls a function with text names only; JSON would turn ``1`` into ``"1"``)."""
    if not isinstance(name, str):
        raise InvalidTaskArguments(
            f"keyword argument {name!r} cannot be a name: it is a {type(name).__name__}, not str"
        )
    try:
        check_unicode(VALUE_ENCODER.encode(name), name)
    except ValueError as exc:
        raise InvalidTaskArguments(f"keyword argument {name!r} cannot be a name: {exc}") from None
    return name
