"""The transcript's data model: sessions, messages and their parts.

Parts are a tagged union on ``kind`` so that a message round-trips to JSON
(and to SQLite rows) without losing which variant it was.
"""

from __future__ import annotations

import hashlib
import json
import posixpath
import zlib
from collections.abc import Hashable, Mapping
from datetime import datetime
from types import MemberDescriptorType
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self, TypeVar

import orjson
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

Model = TypeVar("Model", bound=BaseModel)

DEFERRED = ConfigDict(defer_build=True)
"""The models' validators are built when first used, not on import: a command that only lists sessions, and
the app while it draws its first screen, do not pay for them (an eighth of a second here)."""

Role = Literal["user", "assistant", "system"]

MessageKind = Literal[
    "message",
    "tool_result",
    "tool_result_archived",
    "tool_summary",
    "summary",
    "compact_boundary",
]
"""Spec 003 kinds, plus the two a compaction leaves behind."""


class _Part(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)  # see DEFERRED
    __slots__ = ("_content_key", "_tokens")
    """The cached hash, and the raw token count the store kept for this part, live in slots, not pydantic
    private attributes: a private attribute costs every part a dict (a tenth of a 100,000-message session's
    memory) and a Python-level hook when it is made."""

    if TYPE_CHECKING:  # the slots' types; unset until first assigned, so read them where AttributeError is caught
        _content_key: str
        _tokens: int

    def content_key(self) -> str:
        """A stable hash of the part's content, used to cache token counts; computed once per object."""
        try:
            return self._content_key
        except AttributeError:
            return self.json_and_key()[1]

    def json_and_key(self) -> tuple[str, str]:
        """The part as JSON and its content key, from one serialisation (storing a part needs both)."""
        text = self.model_dump_json()
        try:
            return text, self._content_key
        except AttributeError:
            key = hashlib.blake2b(text.encode(), digest_size=16).hexdigest()
            object.__setattr__(self, "_content_key", key)
            return text, key

    def __eq__(self, other: object) -> bool:
        # The cached hash is bookkeeping, not content: two parts are equal when their fields are.
        return type(self) is type(other) and self.__dict__ == other.__dict__

    def __hash__(self) -> int:
        return hash(self.content_key())

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        copy = super().model_copy(update=update, deep=deep)  # slots are not copied: new content, new hash
        if not update and hasattr(self, "_content_key"):
            copy.with_key(self._content_key)
        return copy

    def with_key(self, key: str) -> Self:
        """Set the hash stored beside this part, so loading a session does not recompute it."""
        object.__setattr__(self, "_content_key", key)
        return self

    def stored_tokens(self) -> int | None:
        """The raw count the store kept with this part, if it came from the store (see ``TokenCounter``)."""
        try:
            tokens: int = _TOKENS_SLOT.__get__(self)
        except AttributeError:
            return None
        return tokens

    def with_tokens(self, tokens: int) -> Self:
        """Keep the stored count on the part itself: a loaded session then holds no hash string and no cache
        entry per part (a 100,000-message session has 127,000 of them), and counting is one slot read."""
        object.__setattr__(self, "_tokens", tokens)
        return self


_TOKENS_SLOT: MemberDescriptorType = vars(_Part)["_tokens"]
"""The slot read directly: an unset slot read through the part falls back to pydantic's ``__getattr__``, which
raises three times (4 µs, five times the slot's own miss), and every count of a part not from the store asks."""


class TextPart(_Part):
    kind: Literal["text"] = "text"
    text: str


class ThinkingPart(_Part):
    kind: Literal["thinking"] = "thinking"
    text: str = ""
    redacted: bool = False
    signature: str = ""
    """The API's signature, needed to send the block back."""


PATH_KEYS = ("path", "file_path", "notebook_path", "filePath")
"""The arguments of a tool call that name a file, in the order its files are listed."""


def posix_path(path: str) -> str:
    """``path`` with forward slashes, normalised: how calls' files are compared."""
    return posixpath.normpath(path.replace("\\", "/"))


class ToolUsePart(_Part):
    __slots__ = ("_call_hash", "_call_key", "_file_paths")
    if TYPE_CHECKING:
        _call_key: tuple[str, Hashable]
        _call_hash: int
        _file_paths: tuple[str, ...]

    kind: Literal["tool_use"] = "tool_use"
    id: str
    name: str
    input: dict[str, Any] = Field(default_factory=dict)

    def call_key(self) -> tuple[str, Hashable]:
        """Equal for calls of the same tool with the same input, whatever the order of its keys, an argument
        given as null being one not given (``{filePath, extra: null}`` repeats ``{filePath}``). Worked out once
        per part and kept in a slot, as the content key is: the planners ask it of every call on every planning
        (a long session's thousands of sorted inputs were most of deduplication's time)."""
        try:
            key: tuple[str, Hashable] = _CALL_KEY_SLOT.__get__(self)
        except AttributeError:
            key = (self.name, _input_key(self.input))
            object.__setattr__(self, "_call_key", key)
        return key

    def call_hash(self) -> int:
        """``hash(self.call_key())``, worked out once: a tuple works its hash out again each time."""
        try:
            value: int = _CALL_HASH_SLOT.__get__(self)
        except AttributeError:
            value = hash(self.call_key())
            object.__setattr__(self, "_call_hash", value)
        return value

    def file_paths(self) -> tuple[str, ...]:
        """The files the call names (see :data:`PATH_KEYS`), as normalised POSIX paths. Kept in a slot as the
        call key is: the planners ask it of every read and write on every planning."""
        try:
            paths: tuple[str, ...] = _FILE_PATHS_SLOT.__get__(self)
        except AttributeError:
            found = (self.input.get(key) for key in PATH_KEYS)
            paths = tuple(posix_path(p) for p in found if p and isinstance(p, str))
            object.__setattr__(self, "_file_paths", paths)
        return paths


_CALL_KEY_SLOT: MemberDescriptorType = vars(ToolUsePart)["_call_key"]
_CALL_HASH_SLOT: MemberDescriptorType = vars(ToolUsePart)["_call_hash"]
_FILE_PATHS_SLOT: MemberDescriptorType = vars(ToolUsePart)["_file_paths"]
"""All three read directly, as :data:`_TOKENS_SLOT` is: the first read of every part misses."""
_CANONICAL = json.JSONEncoder(sort_keys=True, ensure_ascii=False, default=str)


def _input_key(tool_input: dict[str, Any]) -> Hashable:
    """The sorted items when they are all hashable (strings and numbers, the common case, and cheap), else
    canonical JSON; null arguments left out."""
    if None in tool_input.values():
        tool_input = {name: value for name, value in tool_input.items() if value is not None}
    items = tool_input.items()
    key = tuple(sorted(items)) if len(items) > 1 else tuple(items)  # the names differ: values never compared
    try:
        hash(key)
    except TypeError:
        return _CANONICAL.encode(tool_input)
    return key


class ImagePart(_Part):
    kind: Literal["image"] = "image"
    media_type: str = "image/png"
    byte_size: int = 0
    width: int | None = None
    height: int | None = None
    name: str | None = None


class ToolResultPart(_Part):
    kind: Literal["tool_result"] = "tool_result"
    tool_use_id: str
    text: str = ""
    images: tuple[ImagePart, ...] = ()
    is_error: bool = False


Part = Annotated[
    TextPart | ThinkingPart | ToolUsePart | ToolResultPart | ImagePart,
    Field(discriminator="kind"),
]
PartAdapter: TypeAdapter[Part] = TypeAdapter(Part, config=DEFERRED)

_PART_TYPES: dict[str, type[TextPart | ThinkingPart | ToolUsePart | ToolResultPart | ImagePart]] = {
    "text": TextPart, "thinking": ThinkingPart, "tool_use": ToolUsePart, "tool_result": ToolResultPart,
    "image": ImagePart,
}
_PART_KINDS = {kind: kind for kind in _PART_TYPES}
_EVERY_FIELD: dict[type[BaseModel], set[str]] = {}
"""Per class, the set of all its field names, shared by the instances :func:`trusted` makes: every field
was set, and assigning one adds a name already there (a set per instance was a tenth of a session's memory)."""


_FIELD_NAMES: dict[type[BaseModel], frozenset[str]] = {}
"""Per class, its field names (pydantic's ``model_fields`` is a property that builds a view on every read)."""


def parse_stored(body: str | bytes) -> Any:
    """JSON the store wrote: orjson reads a session's 45 MB of part bodies in a third of the standard
    library's time; what it refuses (an integer wider than 64 bits) goes to the standard library.
    A body stored as bytes was compressed (see ``Store.save_messages``)."""
    if isinstance(body, bytes):
        body = zlib.decompress(body)
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def trusted(cls: type[Model], fields: dict[str, Any], private: dict[str, Any] | None = None) -> Model:
    """An instance of ``cls`` from fields that already passed its validation once (a row the store wrote).

    What ``model_construct`` does, without its per-field default lookup: opening a stored session
    builds one model per message and per part, and validating them again doubled the open time.
    ``fields`` must hold every field, with values of the field's type.
    """
    every = _EVERY_FIELD.get(cls)
    if every is None:
        every = _EVERY_FIELD[cls] = set(cls.model_fields)
    instance = cls.__new__(cls)
    setattr_ = object.__setattr__
    setattr_(instance, "__dict__", fields)
    setattr_(instance, "__pydantic_fields_set__", every)
    setattr_(instance, "__pydantic_extra__", None)
    setattr_(instance, "__pydantic_private__", private)
    return instance


def _stored_fields(cls: type[BaseModel], data: dict[str, Any]) -> dict[str, Any] | None:
    """``data`` (parsed from a ``model_dump_json`` of ``cls``) itself, when it holds exactly the class's fields;
    None when the fields differ (a row written by another version): those go through validation. orjson
    already shares the key strings of what it parses (its key cache), so 100,000 rows hold one copy of each
    name without building each row's dict again (a tenth of reading a stored session)."""
    names = _FIELD_NAMES.get(cls)
    if names is None:
        names = _FIELD_NAMES[cls] = frozenset(cls.model_fields)
    return data if data.keys() == names else None


def stored_model(cls: type[Model], body: str) -> Model:
    """A model from the JSON the store wrote for it."""
    data = parse_stored(body)
    fields = _stored_fields(cls, data)
    return cls.model_validate(data) if fields is None else trusted(cls, fields)


def stored_part(body: str | bytes, tokens: int, shared: dict[str, str] | None = None) -> Part:
    """A part from the JSON the store wrote for it (``model_dump_json``: every field present), with its count.

    ``shared`` holds strings already seen while loading: a call's id (in its call and in its result) and a
    tool's argument names are then one string each, not one per part.
    """
    data = parse_stored(body)
    cls = _PART_TYPES.get(data.get("kind", ""))
    fields = _stored_fields(cls, data) if cls is not None and not data.get("images") else None
    if cls is None or fields is None:  # nested image models, or another version's row: validated
        return PartAdapter.validate_python(data).with_tokens(tokens)
    fields["kind"] = _PART_KINDS[fields["kind"]]  # one shared string, not one per row
    if "images" in fields:
        fields["images"] = ()
    if shared is not None:
        for name in ("id", "tool_use_id", "name"):
            value = fields.get(name)
            if value is not None:
                fields[name] = shared.setdefault(value, value)
        arguments = fields.get("input")
        if arguments:
            fields["input"] = {shared.setdefault(key, key): value for key, value in arguments.items()}
    return trusted(cls, fields).with_tokens(tokens)


class Usage(BaseModel):
    """What the API reported for one request (or what the engine computed, if ``synthetic``)."""

    model_config = DEFERRED

    input_tokens: int = 0
    output_tokens: int = 0
    cache_creation_input_tokens: int = 0
    cache_read_input_tokens: int = 0
    cache_creation_1h_input_tokens: int = 0
    """Of ``cache_creation_input_tokens``, those written to the one-hour cache (priced higher than five minutes)."""
    reasoning_tokens: int = 0
    """Of ``output_tokens``, those the model spent reasoning (OpenAI reports them; its reasoning is encrypted)."""
    model: str | None = None
    synthetic: bool = False

    @property
    def total_input(self) -> int:
        """Everything the request sent, cached or not: the size of the context."""
        return self.input_tokens + self.cache_creation_input_tokens + self.cache_read_input_tokens

    @property
    def cache_hit_rate(self) -> float | None:
        total = self.total_input
        return self.cache_read_input_tokens / total if total else None


class Message(BaseModel):
    model_config = DEFERRED

    id: str
    session_id: str
    index: int
    role: Role
    parts: list[Part] = Field(default_factory=list)
    kind: MessageKind = "message"
    agent_visible: bool = True
    user_visible: bool = True
    sidechain: bool = False
    created_at: datetime | None = None
    model: str | None = None
    usage: Usage | None = None
    source: dict[str, Any] = Field(default_factory=dict)
    """Where the message came from: format, line numbers, ids of the original records."""

    @property
    def text(self) -> str:
        """All text parts joined, the way a one-line preview or a search sees the message."""
        return "\n".join(p.text for p in self.parts if isinstance(p, TextPart))

    def tool_uses(self) -> list[ToolUsePart]:
        return [p for p in self.parts if isinstance(p, ToolUsePart)]

    def tool_results(self) -> list[ToolResultPart]:
        return [p for p in self.parts if isinstance(p, ToolResultPart)]


class Session(BaseModel):
    model_config = DEFERRED

    id: str
    title: str | None = None
    source_format: str = "engine"
    source_path: str | None = None
    source_digest: str | None = None
    """Digest of the imported file's identity, so a re-import finds the same session."""
    model: str | None = None
    context_window: int | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
