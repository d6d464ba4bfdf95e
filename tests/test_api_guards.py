"""Guards on the wire mapping: every ask field is classified, and the
inbound mapping drops every server-owned one."""

from __future__ import annotations

from google.protobuf.descriptor import FieldDescriptor
from hypothesis import given, settings
from hypothesis import strategies as st

from compass.v1 import comms_pb2 as pb
from compass_server.api.mapping import OWNERSHIP, ask_from_wire, ask_to_wire
from compass_server.store import InvalidArgument


def test_every_ask_field_is_classified_as_client_or_server_owned() -> None:
    for message in (pb.Ask, pb.AskQuestion, pb.AskOption):
        d = message.DESCRIPTOR
        owners = OWNERSHIP[d.full_name]
        names = {f.name for f in d.fields}
        assert not owners["client"] & owners["server"], d.full_name
        unclassified = names - owners["client"] - owners["server"]
        assert not unclassified, (
            f"{d.full_name} has fields {sorted(unclassified)} that are neither client- nor "
            "server-owned: classify them in compass_server/api/mapping.py OWNERSHIP"
        )
        assert owners["client"] | owners["server"] <= names, "OWNERSHIP names a removed field"


# Fields whose value must have a form to be read at all.
FORMED = {
    "answerer_account_ids": "8d7c1f0e-0000-4000-8000-000000000001",
    "escalate_to_account_ids": "8d7c1f0e-0000-4000-8000-000000000002",
    "escalate_to_channel_id": "8d7c1f0e-0000-4000-8000-000000000003",
}


def _set_every_field(msg: object) -> None:
    """Sets every scalar field to a non-default value, recursing into messages."""
    d = msg.DESCRIPTOR  # type: ignore[attr-defined]
    for f in d.fields:
        if f.name in FORMED and f.is_repeated:
            getattr(msg, f.name).append(FORMED[f.name])
        elif f.name in FORMED:
            setattr(msg, f.name, FORMED[f.name])
        elif f.full_name == "compass.v1.Ask.deadline":
            msg.deadline.FromSeconds(1_900_000_000)  # type: ignore[attr-defined]
        elif f.full_name == "compass.v1.Ask.timeout":
            msg.timeout.FromSeconds(600)  # type: ignore[attr-defined]
        elif f.message_type is not None:
            child = getattr(msg, f.name).add() if f.is_repeated else getattr(msg, f.name)
            _set_every_field(child)
        elif f.is_repeated:
            getattr(msg, f.name).append("x")
        elif f.type == FieldDescriptor.TYPE_BOOL:
            setattr(msg, f.name, True)
        elif f.type == FieldDescriptor.TYPE_STRING:
            setattr(msg, f.name, f"set-{f.name}")
        else:
            setattr(msg, f.name, 0)


def test_ask_from_wire_drops_every_server_owned_field() -> None:
    wire = pb.Ask()
    _set_every_field(wire)
    back = ask_to_wire(ask_from_wire(wire))
    for name in OWNERSHIP["compass.v1.Ask"]["server"]:
        field = pb.Ask.DESCRIPTOR.fields_by_name[name]
        if field.message_type is not None and not field.is_repeated:
            assert not back.HasField(name), name
        else:
            assert not getattr(back, name), name
    assert back.deadline == wire.deadline
    assert list(back.answerer_account_ids) == list(wire.answerer_account_ids)
    for q in back.questions:
        for name in OWNERSHIP["compass.v1.AskQuestion"]["server"]:
            assert not q.HasField(name) if name in ("recommended",) else not getattr(q, name), name
        for name in OWNERSHIP["compass.v1.AskQuestion"]["client"]:
            src = getattr(wire.questions[0], name)
            assert getattr(q, name) == src, name


@settings(max_examples=200)
@given(data=st.binary(max_size=200))
def test_any_bytes_that_parse_map_without_raising_unexpectedly(data: bytes) -> None:
    try:
        wire = pb.Ask.FromString(data)
    except Exception:
        return
    try:
        ask = ask_from_wire(wire)
    except InvalidArgument:
        return  # a malformed answerer id or an unholdable deadline: refused, by name
    assert ask.ask_id == "" and not ask.answered and not ask.cancelled and ask.ending is None
