"""Text as the store holds it: NUL (U+0000) is stored as ``␀`` (U+2400 SYMBOL FOR NULL), on every backend.

PostgreSQL ``TEXT`` cannot hold NUL (the driver refuses the whole statement), while SQLite,
protobuf and Python strings can; a model's prompt, a tool name, a task id or an ack's detail
with a NUL in it would otherwise be lost on PostgreSQL alone (the request dropped, the run's
sequence left with a gap). So every text value the store writes or looks up, and every event
before it is hashed onto the audit chain, has its NULs replaced by ``␀`` — the same on SQLite
and PostgreSQL, so the chain, the columns and ``audit verify`` agree on both, and a person
reading ``pending``, ``show`` or the inbox sees where a NUL was. A lookup by a text holding NUL
finds the record stored for it (the same replacement is applied to the parameter).

NUL is the only character PostgreSQL ``TEXT`` refuses that a protobuf string can carry (a lone
surrogate is refused by protobuf, SQLite and PostgreSQL alike, before anything is written).
JSON columns (arguments, payloads, acks' data) never hold a raw NUL: JSON writes it ``\\u0000``,
which is kept as is, so an argument digest is computed and checked on the very arguments the
tool receives. Text a person sends to ``goldfive serve`` is refused with a NUL instead (400,
naming the field): a signed decision is never altered after it was signed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from .._stored import storable
from ..pb.v1 import events_pb2
from .audit import canonical_event_bytes

__all__ = ["storable_event", "storable_params"]

_NUL = "\x00"


def storable_params(params: Sequence[Any]) -> tuple[Any, ...]:
    """Query parameters with every text value made storable (other values as they are)."""
    for p in params:
        if isinstance(p, str) and _NUL in p:
            return tuple(storable(q) if isinstance(q, str) else q for q in params)
    return tuple(params)  # nearly always: a look at each, no copy


def storable_event(event: events_pb2.Event) -> tuple[events_pb2.Event, bytes]:
    """The event as the store keeps it and the bytes the chain hashes: a copy with every string field made
    storable when one holds a NUL, else ``event`` itself (the event the caller emitted is never changed)."""
    body = canonical_event_bytes(event)
    if b"\x00" not in body:  # no field can hold a NUL: a string's NUL is a 0x00 byte of the serialization
        return event, body
    copy = events_pb2.Event()
    copy.CopyFrom(event)
    if not _escape(copy):
        return event, body  # the 0x00 byte was a number or a length, not text
    return copy, canonical_event_bytes(copy)


def _escape(message: Message) -> bool:
    """Make every string field of ``message`` (nested, repeated and map ones too) storable; True if any changed."""
    changed = False
    for field, value in message.ListFields():
        if field.type == FieldDescriptor.TYPE_STRING:
            if field.is_repeated:
                texts = list(value)
                fixed = [storable(t) for t in texts]
                if fixed != texts:
                    del value[:]
                    value.extend(fixed)
                    changed = True
            elif _NUL in value:
                setattr(message, field.name, storable(value))
                changed = True
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            entry = field.message_type
            if entry is not None and entry.GetOptions().map_entry:
                changed = _escape_map(entry, value) or changed
            elif field.is_repeated:
                for item in value:
                    changed = _escape(item) or changed
            else:
                changed = _escape(value) or changed
    return changed


def _escape_map(entry: Descriptor, mapping: Any) -> bool:
    """A map field: its text keys and values made storable (message values in place)."""
    key_is_text = entry.fields_by_name["key"].type == FieldDescriptor.TYPE_STRING
    value_type = entry.fields_by_name["value"].type
    changed = False
    for key in list(mapping):
        if value_type == FieldDescriptor.TYPE_MESSAGE:
            changed = _escape(mapping[key]) or changed
        new_key = storable(key) if key_is_text else key
        value = mapping[key]
        new_value = storable(value) if value_type == FieldDescriptor.TYPE_STRING else value
        if new_key == key and new_value is value:
            continue
        if value_type == FieldDescriptor.TYPE_MESSAGE:
            mapping[new_key].CopyFrom(value)
        else:
            mapping[new_key] = new_value
        if new_key != key:
            del mapping[key]
        changed = True
    return changed
