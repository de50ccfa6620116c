"""The answers GET /v1/capacity gave recently: autoscalers repeat the same question.

Two caches, both keyed by the catalog token, so that a catalog change is a miss:

- `AnswerCache`: the computed `CapacityDetail` of a deployment profile's question (its
  capacity endpoint and its gauges on /metrics share it);
- `EncodedAnswers`: the bytes GET /v1/capacity sent for a question in one format, with their
  ETag and headers, which `hot_path.CapacityHotPath` sends again before FastAPI is reached.

A question's key is canonical (`CapacityKey`): the validated query's values without `format`
and `field` (the order of parameters, defaults spelt out, `api_key`, `_=123` and unknown
parameters leave it alone), plus the format it is answered in and the `field` a text answer
names.
`EncodedAnswers` also remembers which canonical question a raw query string asked, so a
repeated URL is one dict lookup.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any, Generic, TypeVar

from ..kit.answer_headers import IGNORED_HEADER, WARNINGS_HEADER, ignored_value, warnings_value
from ..sizing import frozen
from .schemas import CapacityDetail, CapacityQuery

K = TypeVar("K")
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """A dict that forgets the least recently used entry beyond `size`; thread-safe."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._items: OrderedDict[K, V] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            value = self._items.get(key)
            if value is not None:
                self._items.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        with self._lock:
            self._items[key] = value
            self._items.move_to_end(key)
            while len(self._items) > self._size:
                self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)


class AnswerCache(_Lru[tuple[str, str], CapacityDetail]):
    """Recent deployment-profile capacity answers by (catalog token, question), least recently
    used dropped first."""

    def __init__(self, size: int = 2048) -> None:
        super().__init__(size)


# ---- encoded answers ---------------------------------------------------------------------------

_EXCLUDED_FROM_KEY = {"format", "field"}


@dataclass(frozen=True, slots=True)
class CapacityKey:
    """One GET /v1/capacity question, canonical: what is asked, in which format."""

    # The validated query's values in field order, without format and field; a list (the one
    # list field, max_attention_window) as a tuple. Validation makes each field one type, so
    # equal values are one question.
    query: tuple[Any, ...]
    fmt: str  # json, csv, tsv, text or prometheus
    field: str | None
    # Hashed once: every lookup of the answers (and the put of a new one) hashes the key, and
    # the query's eighty values are most of the cost of one.
    _hash: int = dataclass_field(default=0, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_hash", hash((self.query, self.fmt, self.field)))

    def __hash__(self) -> int:
        return self._hash

    @classmethod
    def of(cls, query: CapacityQuery, fmt: str) -> CapacityKey:
        values = dict(query.__dict__)  # the fields, in order (extra parameters are ignored)
        for name in _EXCLUDED_FROM_KEY:
            del values[name]
        window = values["max_attention_window"]
        if window is not None:
            values["max_attention_window"] = tuple(window)
        spec = values["speculative_config"]
        if spec is not None:
            # issue 21: a JSON object, keyed by its canonical text (equal objects, one key)
            values["speculative_config"] = json.dumps(spec, sort_keys=True)
        return cls(tuple(values.values()), fmt, query.field)


@frozen
class EncodedAnswer:
    """A 200 answer as sent: body and headers, ready to send again (or a 304 of it)."""

    body: bytes
    etag: str
    media_type: str
    # ETag, Cache-Control and Vary: what a 304 carries too
    validators: tuple[tuple[bytes, bytes], ...]
    # Kvplan-Warnings, where the answer has warnings (answer_headers): encoded once, with it
    said: tuple[tuple[bytes, bytes], ...] = ()

    @classmethod
    def of(
        cls,
        body: bytes,
        *,
        etag: str,
        media_type: str,
        cache_control: str,
        warnings: Sequence[str] = (),
    ) -> EncodedAnswer:
        validators = (
            (b"etag", etag.encode("latin-1")),
            (b"cache-control", cache_control.encode("latin-1")),
            (b"vary", b"Accept"),
        )
        said = warnings_value(warnings)
        warned = () if said is None else ((WARNINGS_KEY, said.encode("latin-1")),)
        return cls(body, etag, media_type, validators, warned)

    def headers(self) -> list[tuple[bytes, bytes]]:
        """The headers of the 200 answer."""
        return [
            (b"content-type", self.media_type.encode("latin-1")),
            (b"content-length", str(len(self.body)).encode("latin-1")),
            *self.validators,
            *self.said,
        ]


WARNINGS_KEY = WARNINGS_HEADER.lower().encode("latin-1")
IGNORED_KEY = IGNORED_HEADER.lower().encode("latin-1")


def ignored_header(names: Sequence[str]) -> tuple[tuple[bytes, bytes], ...]:
    """The Kvplan-Ignored-Parameters header of a raw question, as ASGI sends it (or none)."""
    value = ignored_value(names)
    return () if value is None else ((IGNORED_KEY, value.encode("latin-1")),)


@frozen
class Asked:
    """What a raw question asked: its canonical question, and the header naming the query
    parameters it ignored (which depend on its spelling, not on the question)."""

    key: CapacityKey
    ignored: tuple[tuple[bytes, bytes], ...]


# The raw form of a question: the query string as sent, and the Accept header (None: absent).
RawQuestion = tuple[bytes, bytes | None]


class EncodedAnswers:
    """GET /v1/capacity answers as sent, by (catalog token, canonical question)."""

    def __init__(self, size: int = 2048, raw_size: int = 4096) -> None:
        self._answers: _Lru[tuple[str, CapacityKey], EncodedAnswer] = _Lru(size)
        self._questions: _Lru[RawQuestion, Asked] = _Lru(raw_size)
        self.hits = 0

    def question(self, raw: RawQuestion) -> Asked | None:
        """What a raw query string asked before, if it was seen."""
        return self._questions.get(raw)

    def remember(self, raw: RawQuestion, asked: Asked) -> None:
        self._questions.put(raw, asked)

    def get(self, token: str, question: CapacityKey) -> EncodedAnswer | None:
        answer = self._answers.get((token, question))
        if answer is not None:
            self.hits += 1
        return answer

    def put(self, token: str, question: CapacityKey, answer: EncodedAnswer) -> None:
        self._answers.put((token, question), answer)

    def __len__(self) -> int:
        """How many answers are held (one per question, however many spellings asked it)."""
        return len(self._answers)
