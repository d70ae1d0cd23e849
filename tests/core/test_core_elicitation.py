"""Asking a person for input (goldfive_core.elicitation): the form's schema, the answer's check, the outcomes.

In-process: a real Session with a channel, answered through control messages as a live run is (the same
parsing, the same book). What is checked is the InputAnswer the asker gets and what the run refuses.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from loop_support import wait_all_tasks_blocked

from goldfive_core import ControlKind, ControlMessage, InMemorySink, Session, SteeringConfig
from goldfive_core.elicitation import InputAnswer, InputRequest, answer_problem, ask_for_input, form_problem

BOOKING: dict[str, Any] = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "minLength": 1, "maxLength": 40, "title": "Name"},
        "guests": {"type": "integer", "minimum": 1, "maximum": 12},
        "email": {"type": "string", "format": "email"},
        "day": {"type": "string", "format": "date"},
        "site": {"type": "string", "format": "uri"},
        "at": {"type": "string", "format": "date-time"},
        "seating": {"type": "string", "enum": ["inside", "terrace"]},
        "menu": {"type": "string", "oneOf": [{"const": "a", "title": "Menu A"}, {"const": "b", "title": "Menu B"}]},
        "extras": {"type": "array", "items": {"enum": ["cake", "wine"]}, "maxItems": 1},
        "budget": {"type": "number", "maximum": 99.5},
        "vegetarian": {"type": "boolean"},
    },
    "required": ["name", "guests"],
}


def test_a_form_is_the_flat_elicitation_subset() -> None:
    assert form_problem(BOOKING) is None
    nested = {"type": "object", "properties": {"who": {"type": "object", "properties": {}}}}
    assert (
        form_problem(nested)
        == "field 'who': type must be one of string, number, integer, boolean or array (multi-select), got 'object'"
    )
    assert "multi-select" in str(form_problem({"properties": {"tags": {"type": "array", "items": {"type": "string"}}}}))
    assert "format must be one of" in str(form_problem({"properties": {"x": {"type": "string", "format": "regex"}}}))
    assert "required must list names" in str(form_problem({"properties": {}, "required": ["ghost"]}))
    many = {"properties": {f"f{i}": {"type": "string"} for i in range(51)}}
    assert "at most 50 fields" in str(form_problem(many))
    assert "field name" in str(form_problem({"properties": {"<b>x</b>": {"type": "string"}}}))
    assert form_problem([]) == "the requested schema must be an object, got list"


@pytest.mark.parametrize(
    ("content", "field", "says"),
    [
        ({"guests": 2}, "name", "is required and missing"),
        ({"name": "Ana", "guests": 2, "card": "4111"}, "card", "is not a field of this form"),
        ({"name": "Ana", "guests": 13}, "guests", "must be at most 12"),
        ({"name": "Ana", "guests": 2.5}, "guests", "must be an integer"),
        ({"name": "Ana", "guests": True}, "guests", "must be an integer"),
        ({"name": "", "guests": 2}, "name", "must have at least 1 characters"),
        ({"name": "A" * 41, "guests": 2}, "name", "must have at most 40 characters"),
        ({"name": "Ana", "guests": 2, "email": "ana@"}, "email", "must be an email address"),
        ({"name": "Ana", "guests": 2, "day": "31/12/2026"}, "day", "must be a date (YYYY-MM-DD)"),
        ({"name": "Ana", "guests": 2, "site": "not a uri"}, "site", "must be a URI"),
        ({"name": "Ana", "guests": 2, "at": "tomorrow"}, "at", "must be a date and time"),
        ({"name": "Ana", "guests": 2, "seating": "roof"}, "seating", "must be one of: 'inside', 'terrace'"),
        ({"name": "Ana", "guests": 2, "menu": "Menu A"}, "menu", "must be one of: 'a', 'b'"),
        ({"name": "Ana", "guests": 2, "extras": ["cake", "wine"]}, "extras", "must have at most 1 choices"),
        ({"name": "Ana", "guests": 2, "extras": ["beer"]}, "extras", "must be a list of: 'cake', 'wine'"),
        ({"name": "Ana", "guests": 2, "budget": 100}, "budget", "must be at most 99.5"),
        ({"name": "Ana", "guests": 2, "vegetarian": "yes"}, "vegetarian", "must be a boolean"),
    ],
)
def test_an_answer_that_does_not_fit_names_its_field(content: dict[str, Any], field: str, says: str) -> None:
    problem = answer_problem(BOOKING, content)
    assert problem is not None and problem.field == field and says in problem.message, problem


def test_an_answer_that_fits_is_taken() -> None:
    full = {
        "name": "Ana",
        "guests": 4,
        "email": "ana@example.com",
        "day": "2026-12-31",
        "site": "https://example.com/x",
        "at": "2026-12-31T20:00:00Z",
        "seating": "terrace",
        "menu": "b",
        "extras": ["wine"],
        "budget": 42,
        "vegetarian": False,
    }
    assert answer_problem(BOOKING, full) is None
    assert answer_problem(BOOKING, {"name": "Bo", "guests": 1}) is None


async def _asked(session: Session, sink: InMemorySink, **request: Any) -> tuple[asyncio.Task[InputAnswer], str]:
    asking = asyncio.create_task(ask_for_input(session, InputRequest(message="How many?", schema=BOOKING, **request)))
    await wait_all_tasks_blocked()
    (event,) = [e.approval_requested for e in sink.of("approval_requested")][-1:]
    assert event.kind == "input" and event.prompt == "How many?"
    return asking, event.target_id


def _session() -> tuple[Session, InMemorySink]:
    sink = InMemorySink()
    return Session(sinks=[sink], config=SteeringConfig(), has_channel=True), sink


async def test_accept_decline_and_cancel_are_distinct_answers() -> None:
    session, sink = _session()
    asking, target = await _asked(session, sink)
    ack = session.dispatch(
        ControlMessage(
            ControlKind.APPROVE, {"target_id": target, "edited_args": {"name": "Ana", "guests": 3}, "decided_by": "ana"}
        )
    )
    assert ack.ok, ack.detail
    assert await asking == InputAnswer(action="accept", content={"name": "Ana", "guests": 3}, answered_by="ana")
    asking, target = await _asked(session, sink)
    assert session.dispatch(ControlMessage(ControlKind.REJECT, {"target_id": target, "decided_by": "bo"})).ok
    assert (await asking).action == "decline"
    asking, target = await _asked(session, sink)
    assert session.dispatch(ControlMessage(ControlKind.REJECT, {"target_id": target, "answer": "cancel"})).ok
    assert (await asking).action == "cancel"
    assert [e.approval_rejected.answer for e in sink.of("approval_rejected")] == ["", "cancel"]


async def test_the_run_refuses_an_answer_that_does_not_fit_and_the_question_stays_open() -> None:
    session, sink = _session()
    asking, target = await _asked(session, sink)
    misfit = session.dispatch(
        ControlMessage(ControlKind.APPROVE, {"target_id": target, "edited_args": {"name": "Ana", "guests": 99}})
    )
    assert not misfit.ok and "'guests' must be at most 12" in misfit.detail
    empty = session.dispatch(ControlMessage(ControlKind.APPROVE, {"target_id": target}))  # an accept with nothing
    assert not empty.ok and "'name' is required and missing" in empty.detail
    wrong = session.dispatch(ControlMessage(ControlKind.APPROVE, {"target_id": target, "answer": "cancel"}))
    assert not wrong.ok and "only be 'cancel', with REJECT" in wrong.detail
    assert not asking.done() and session.approvals.is_open(target)
    assert session.dispatch(ControlMessage(ControlKind.REJECT, {"target_id": target, "answer": "cancel"})).ok
    assert (await asking).action == "cancel"


async def test_no_answer_in_time_and_a_form_that_is_no_form_are_a_cancel() -> None:
    session, _sink = _session()
    answer = await ask_for_input(session, InputRequest(message="?", schema=BOOKING, timeout_ms=20))
    assert answer.action == "cancel" and "nobody answered within 20 ms" in answer.detail
    bad = await ask_for_input(session, InputRequest(message="?", schema={"properties": {"x": {"type": "object"}}}))
    assert bad.action == "cancel" and "nobody was asked" in bad.detail
    alone = Session(sinks=[], config=SteeringConfig(), has_channel=False)
    assert (await ask_for_input(alone, InputRequest(message="?", schema=BOOKING))).action == "cancel"


async def test_a_cancel_only_answers_a_request_for_input() -> None:
    from goldfive_core import ApprovalRequest

    session, _sink = _session()
    waiting = asyncio.create_task(
        session.request_approval(ApprovalRequest(target_id="t", kind="tool", timeout_ms=60_000))
    )
    await wait_all_tasks_blocked()
    refused = session.dispatch(ControlMessage(ControlKind.REJECT, {"target_id": "t", "answer": "cancel"}))
    assert not refused.ok and "only goes with a rejection of an input request" in refused.detail
    assert session.dispatch(ControlMessage(ControlKind.REJECT, {"target_id": "t", "detail": "no"})).ok
    assert (await waiting).decision == "reject"


async def test_an_answer_is_bound_to_the_question_it_was_given_for() -> None:
    """A decision carries the digest of the form the person saw: it never answers another question."""
    from goldfive_core.elicitation import input_digest

    session, sink = _session()
    first = input_digest("How many?", BOOKING)
    other = {**BOOKING, "properties": {**BOOKING["properties"], "card": {"type": "string"}}}
    asking = asyncio.create_task(ask_for_input(session, InputRequest(message="How many?", schema=other)))
    await wait_all_tasks_blocked()
    (event,) = [e.approval_requested for e in sink.of("approval_requested")]
    assert event.args_digest != first
    moved = {"target_id": event.target_id, "args_digest": first, "edited_args": {"name": "Ana", "guests": 2}}
    refused = session.dispatch(ControlMessage(ControlKind.APPROVE, moved))
    assert not refused.ok and "does not match" in refused.detail
    assert session.dispatch(ControlMessage(ControlKind.REJECT, {"target_id": event.target_id})).ok
    assert (await asking).action == "decline"


def test_a_servers_signature_covers_whether_the_person_declined_or_cancelled() -> None:
    from goldfive_core.signing import DecisionSigner, SignedDecision, check_decision

    pytest.importorskip("cryptography")
    from cryptography.hazmat.primitives.asymmetric import ed25519

    signer = DecisionSigner(ed25519.Ed25519PrivateKey.generate())
    facts = SignedDecision(
        target_id="input-1",
        run_id="run-1",
        decision="reject",
        edited_args_json="",
        args_digest="sha256:x",
        decided_by="ana",
        detail="",
        channel="web",
        request_id="req-1",
        request_digest="sha256:r",
    )
    signature = signer.sign(facts)
    common: dict[str, Any] = {
        "target_id": "input-1",
        "run_id": "run-1",
        "approved": False,
        "edited_args": None,
        "args_digest": "sha256:x",
        "decided_by": "ana",
        "detail": "",
        "signature": signature,
        "request_id": "req-1",
        "request_digest": "sha256:r",
    }
    assert check_decision(signer.trust_key, **common) is None
    flipped = check_decision(signer.trust_key, **common, answer="cancel")  # a writer turns the decline into a cancel
    assert flipped is not None and "does not match" in flipped
