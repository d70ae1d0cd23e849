"""Exit codes and output helpers of the ``goldfive`` command, shared by its database and HTTP modes."""

from __future__ import annotations

import datetime
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from ._text import inert
from .limits import LimitError, Limits, parse_json_strict

__all__ = ["EXIT_FAILURE", "EXIT_OK", "EXIT_TIMEOUT", "EXIT_UNREACHABLE", "EXIT_USAGE"]

EXIT_OK = 0
EXIT_FAILURE = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_TIMEOUT = 4


def _say(text: str, *, err: bool = False) -> None:
    stream = sys.stderr if err else sys.stdout
    stream.write(text + "\n")


class _Exit(Exception):
    def __init__(self, code: int, message: str, data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def _json_line(data: Any) -> str:
    # ensure_ascii: every control or non-ASCII character is a \u escape, so JSON output is inert too.
    return json.dumps(data, sort_keys=True, default=str, ensure_ascii=True, allow_nan=False)


class _Out:
    def __init__(self, as_json: bool) -> None:
        self.json = as_json

    def emit(self, text: str, data: Any) -> None:
        """One result: ``text`` for people (already made inert), or ``data`` as one JSON object."""
        _say(_json_line(data) if self.json else text)


def _when(ms: int) -> str:
    if not ms:
        return "-"
    return datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _ago(ms: int) -> str:
    seconds = max(0.0, (time.time() * 1000 - ms) / 1000)
    if seconds < 120:
        return f"{seconds:.0f}s ago"
    if seconds < 7200:
        return f"{seconds / 60:.0f}m ago"
    return f"{seconds / 3600:.1f}h ago"


def _say_pending(items: Sequence[Mapping[str, Any]]) -> None:
    """One line per pending request (and its orphan note), the same in the database and HTTP modes."""
    for item in items:
        # Each part is clipped once: clipping the line again would cut the "[+N chars]" it ends with.
        tool = item["tool_name"]
        what = f"{inert(tool, 60)} {inert(item['args_json'], 60)}" if tool else inert(item["prompt"], 80)
        _say(
            f"{inert(item['target_id'], 80)}  [{item['status']}]  {inert(item['kind'], 10)}: {what}  "
            f"(run {inert(item['run_id'], 60)}, asked {_ago(item['requested_at_ms'])})"
        )
        for line in review_lines(item.get("review"), short=True):
            _say(f"    {line}")
        if item.get("form"):
            _say(f"    {inert(item['prompt'], 200)}")
            answer = f"goldfive answer {inert(item['target_id'], 80)} FIELD=VALUE ..."
            _say(f"    fields: {_form_summary(item['form'])}  ({answer})")
        if item["status"] == "detached":
            _say(f"    {inert(item['orphaned_reason'], 200)}")
        elif item["orphaned_reason"]:
            _say(f"    orphaned: {inert(item['orphaned_reason'], 200)}; a decision is kept for a replay of the call")


def _form_summary(form: Mapping[str, Any]) -> str:
    """A form's fields on one line, required ones starred (``name*, guests*, seating``)."""
    required = set(form.get("required") or ())
    names = [inert(name, 64) + ("*" if name in required else "") for name in form.get("properties") or {}]
    return ", ".join(names[:50]) or "none"


def _form_lines(form: Mapping[str, Any]) -> list[str]:
    """``goldfive show``: each field of a form, its type, bounds and description (the asker's words, inert)."""
    required = set(form.get("required") or ())
    lines = []
    for name, prop in (form.get("properties") or {}).items():
        if not isinstance(prop, Mapping):
            continue
        facts = [inert(prop.get("type") or "?", 20)]
        if name in required:
            facts.append("required")
        low, high = _bounds(prop)
        if low is not None or high is not None:
            facts.append(f"{'' if low is None else low}..{'' if high is None else high}")
        if prop.get("format"):
            facts.append(inert(prop["format"], 20))
        choices = prop.get("enum") or [o.get("const") for o in prop.get("oneOf") or () if isinstance(o, Mapping)]
        items = prop.get("items")
        if not choices and isinstance(items, Mapping):
            choices = items.get("enum") or [o.get("const") for o in items.get("anyOf") or () if isinstance(o, Mapping)]
        if choices:
            facts.append("one of " + inert(", ".join(str(c) for c in choices), 200))
        said = prop.get("description") or prop.get("title") or ""
        lines.append(f"  {inert(name, 64)} ({', '.join(facts)})" + (f": {inert(said, 200)}" if said else ""))
    return lines


def _bounds(prop: Mapping[str, Any]) -> tuple[Any, Any]:
    for low, high in (("minimum", "maximum"), ("minLength", "maxLength"), ("minItems", "maxItems")):
        if low in prop or high in prop:
            return prop.get(low), prop.get(high)
    return None, None


def _page_note(shown: int, offset: int, total: int, command: str) -> str:
    """Say what part of a list is shown and how to get the rest; "" when everything is shown."""
    more = max(total - offset - shown, 0)
    if not offset and not more:
        return ""
    first = offset + 1 if shown else offset
    note = f"showing {first}-{offset + shown} of {total}"
    if more:
        note += f"; {more} more: {command} --offset {offset + shown}"
    return note


def _doubt(item: Mapping[str, Any]) -> dict[str, Any]:
    """An in-doubt call (``in_doubt_json``) with the sentence a person reads."""
    return {
        **item,
        "detail": f"the approved tool started {_when(item['started_at_ms'])} in run {item['run_id']}, whose process "
        f"stopped before recording a result ({item['liveness']}); it may or may not have run — check before retrying",
    }


def _say_pending_page(
    listed: Sequence[Mapping[str, Any]], total: int, offset: int, doubts: Sequence[Mapping[str, Any]], out: _Out
) -> int:
    """``goldfive pending``'s output (one JSON object with ``--json``), the same in the database and HTTP modes."""
    in_doubt = [_doubt(d) for d in doubts]
    if out.json:
        more = max(total - offset - len(listed), 0)
        out.emit("", {"pending": list(listed), "total": total, "offset": offset, "more": more, "in_doubt": in_doubt})
        return 0
    if not total:
        _say("no pending approvals")
    _say_pending(listed)
    note = _page_note(len(listed), offset, total, "goldfive pending")
    if note:
        _say(note)
    for doubt in in_doubt:
        _say(f"IN DOUBT  {inert(doubt['target_id'], 80)}: {inert(doubt['detail'], 400)}")
        _say(f"    settle it: goldfive resolve {inert(doubt['target_id'], 80)} --ran | --did-not-run")
    return 0


_RUN_KEYS = ("run_id", "pid", "host", "status", "liveness", "paused")


def _pause_text(pause: Mapping[str, Any] | None) -> str:
    if not pause:
        return ""
    if pause.get("escalated"):
        what = str(pause.get("drift_kind") or "drift").replace("_", " ")
        return f"  ESCALATED ({inert(what, 40)}): resume, steer or cancel it"
    who = f" by {inert(pause['by'], 60)}" + (f" ({inert(pause['channel'], 10)})" if pause.get("channel") else "")
    why = f": {inert(pause['reason'], 120)}" if pause.get("reason") else ""
    return f"  PAUSED{who if pause.get('by') else ''}{why}"


def _say_runs(runs: Sequence[Mapping[str, Any]], total: int, offset: int, out: _Out) -> int:
    """``goldfive runs``' output from run JSON objects, the same in the database and HTTP modes."""
    items = [{key: run.get(key) for key in _RUN_KEYS} for run in runs]
    if out.json:
        more = max(total - offset - len(items), 0)
        out.emit("", {"runs": items, "total": total, "offset": offset, "more": more})
        return 0
    for item in items:
        _say(
            f"{inert(item['run_id'], 80)}  pid {item['pid']} on {inert(item['host'], 60)}  "
            f"{inert(item['liveness'], 200)}{_pause_text(item['paused'])}"
        )
    if not total:
        _say("no runs recorded")
    note = _page_note(len(items), offset, total, "goldfive runs")
    if note:
        _say(note)
    return 0


def _say_events(lines: Sequence[tuple[str, dict[str, Any]]], total: int, out: _Out, *, follow: bool) -> None:
    """``goldfive events``' past events (text, JSON) of ``total``; one JSON object unless ``--follow``."""
    earlier = max(total - len(lines), 0)
    if out.json and not follow:
        out.emit("", {"events": [data for _, data in lines], "total": total, "earlier": earlier})
        return
    if earlier and not out.json:
        _say(f"({earlier} earlier events not shown; --limit N shows more, --limit 0 all)")
    for text, data in lines:
        out.emit(text, data)


_FULL = 4000  # characters of one untrusted field shown in full views


def _original_json(item: Mapping[str, Any]) -> str:
    """The call's own arguments of an edited quorum: ``original_args_json`` (the store) or ``original_args`` (HTTP)."""
    if item.get("original_args_json"):
        return str(item["original_args_json"])
    original = item.get("original_args")
    return "" if original is None else json.dumps(original, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def _original_lines(args_json: str, digest: str) -> list[str]:
    """When an approver of a quorum edited the arguments: the call's own, so the change is reviewable."""
    if not digest:
        return []
    return [
        f"originally requested  {inert(args_json, 20_000)}  (digest {inert(digest, 200)}; edited by an approver: "
        "the args and digest above are the ones to vote on)"
    ]


def _policy_lines(policy: Mapping[str, Any] | None, progress: str = "", *, error: str = "") -> list[str]:
    """What the request's rule says (who may answer, how many, escalation, expiry) and the votes so far.

    ``policy`` is the approval's ``policy`` object: the server's rule under ``serve --policy`` (``source``
    ``server``), else the fields the agent wrote; ``error`` why the agent's policy asked (when no rule did).
    """
    lines = []
    if policy:
        rule = policy.get("rule") or ""
        parts = [f"rule {inert(rule, 80)!r} ({inert(policy.get('action') or '?', 20)})" if rule else "no rule"]
        if policy.get("disagrees"):
            named = str(policy.get("requested_rule") or "")
            parts.append(
                "the request stated other terms"
                if named == policy.get("rule")
                else f"the request named {inert(named, 80)!r}"
            )
        for key in ("approvers", "barred"):
            if policy.get(key):
                parts.append(f"{key} {inert(','.join(str(v) for v in policy[key]), 200)}")
        quorum = policy.get("quorum")
        if isinstance(quorum, int) and quorum > 1:
            parts.append(f"quorum {quorum}")
        if policy.get("escalate_after"):
            to = inert(policy.get("escalate_to") or "?", 200)
            parts.append(f"escalates after {inert(policy['escalate_after'], 20)} to {to}")
        if policy.get("expires"):
            parts.append(f"expires {inert(policy['expires'], 20)} after asked")
        grants = ",".join(str(g.get("scope", "")) for g in policy.get("grants") or () if isinstance(g, Mapping))
        if grants:
            parts.append(f"grants {inert(grants, 200)}")
        if policy.get("source") == "server":
            parts.append("as the server's policy says")
        lines.append("policy     " + inert(" · ".join(parts), 4000))
        if policy.get("note"):
            lines.append(f"policy     {inert(policy['note'], 400)}")
        error = str(policy.get("error") or "")
    if error:  # why nobody may decide (the server's refusal), or why the agent's policy asked
        said = "" if error.startswith("refused") else "asked because: "
        lines.append(f"policy     {said}{inert(error, 300)}")
    if progress:
        lines.append(f"approvals  {inert(progress, 400)}")
    return lines


def review_lines(review: Mapping[str, Any] | None, *, short: bool = False) -> list[str]:
    """What the rule's reviewer said (the approval's ``review`` object); every field is the agent's: inert."""
    if not isinstance(review, Mapping):
        return []
    limit = 200 if short else 1000
    by = inert(review.get("by") or "", 120)
    if review.get("error"):
        lines = [f"reviewer   {by} gave no verdict: {inert(review['error'], limit)}"]
    else:
        reason = inert(review.get("reason") or "", limit)
        lines = [
            f"reviewer   {by} says {inert(review.get('verdict') or 'ask', 10)}" + (f": {reason}" if reason else "")
        ]
    if review.get("note"):
        lines.append(f"reviewer   {inert(review['note'], 300)}")
    if review.get("verified") is False:
        lines.append(f"reviewer   NOT VERIFIED: {inert(review.get('verified_note') or '', 300)}")
    return [line.removeprefix("reviewer   ") if short else line for line in lines[: 1 if short else None]]


def _show_text(item: Mapping[str, Any]) -> str:
    """``goldfive show``: one approval in full, the same in the database and HTTP modes.

    ``item`` has the approval's fields (as ``ApprovalRow.as_dict()`` and the server's JSON name them),
    ``status`` / ``orphaned_reason`` as the caller judged the run, and ``execution`` (a state or
    ``"none"``) with ``execution_started_at_ms``.
    """

    def t(key: str, limit: int = _FULL) -> str:
        return inert(item.get(key) or "", limit)

    why = item.get("orphaned_reason") or ""
    lines = [
        f"approval   {t('target_id')}  ({t('kind', 20)})",
        f"status     {item['status']}" + (f" — {inert(why, _FULL)}" if why else ""),
        f"run        {t('run_id')}" + (f"  session {t('session_id')}" if item.get("session_id") else ""),
        f"asked      {_when(item['requested_at_ms'])}  (expires {_when(item['expires_at_ms'])})",
        f"request    {t('request_id', 200)}" if item.get("request_id") else "",
        f"prompt     {t('prompt')}" if item.get("prompt") else "",
        f"task       {t('task_id')}" if item.get("task_id") else "",
        f"tool       {t('tool_name')}" if item.get("tool_name") else "",
        f"args       {t('args_json')}" if item.get("args_json") else "",
        f"digest     {t('args_digest')}" if item.get("args_digest") else "",
        *_original_lines(_original_json(item), str(item.get("original_args_digest") or "")),
        *_policy_lines(
            item.get("policy"),
            str(item.get("quorum_progress") or ""),
            error=str((item.get("metadata") or {}).get("policy_error") or ""),
        ),
        *review_lines(item.get("review")),
        *(["fields", *_form_lines(item["form"])] if item.get("form") else []),
    ]
    if item.get("decision"):
        who = t("decided_by", 200) or "?"
        lines.append(
            f"decision   {t('decision', 20)} by {who} at {_when(item['decided_at_ms'])} (via {t('decided_via', 20)})"
        )
        if item.get("detail"):
            lines.append(f"detail     {t('detail')}")
        if item.get("edited_args_json"):
            lines.append(f"{'answer    ' if item.get('kind') == 'input' else 'edited    '} {t('edited_args_json')}")
    elif item.get("detail"):
        lines.append(f"detail     {t('detail')}")
    execution = item.get("execution") or "none"
    if execution == "released":
        lines.append(
            f"execution  released, not run, at {_when(item.get('execution_released_at_ms') or 0)}: the run was "
            "cancelled or paused before the body started; a re-ask may run it"
        )
    elif execution != "none":
        lines.append(f"execution  {inert(execution, 20)} (started {_when(item.get('execution_started_at_ms') or 0)})")
    if item.get("finished_after_resolved_at_ms"):
        lines.append(
            f"finished   {_when(item['finished_after_resolved_at_ms'])}, after a person resolved it as not run: "
            "it did run (on the audit log); check before a replay runs it again"
        )
    lines.extend(_context_lines(item.get("context"), run_id=t("run_id", 200)))
    return "\n".join(line for line in lines if line)


def _context_lines(context: Mapping[str, Any] | None, *, run_id: str) -> list[str]:
    """What led to the request (``approval_json``'s ``context``), inert: the input, who, the last steps, why."""
    if not context:
        return []

    def c(key: str, limit: int = _FULL) -> str:
        return inert(str(context.get(key) or ""), limit)

    who = ", ".join(
        part
        for part in (
            f"agent {c('agent', 200)}" if context.get("agent") else "",
            f"started by {c('started_by', 200)}" if context.get("started_by") else "",
            f"for {c('on_behalf_of', 200)}" if context.get("on_behalf_of") else "",
            f"on {c('adapter', 40)}" if context.get("adapter") else "",
        )
        if part
    )
    lines = [
        "context",
        f"  asked      {c('input')}" if context.get("input") else "",
        f"  who        {who}" if who else "",
        f"  why        {c('why', 400)}",
    ]
    for step in context.get("steps") or ():
        kind = {"tool_call": "called", "tool_result": "result", "model_text": "said"}.get(str(step.get("kind")), "step")
        name = inert(str(step.get("name") or ""), 200)
        lines.append(f"  {kind:<10} {name + ': ' if name else ''}{inert(str(step.get('text') or ''), 400)}")
    if context.get("note"):
        lines.append(f"  ({c('note', 200)})")
    lines.append(f"  whole run  goldfive events --run {run_id}")
    return lines


def _parse_edit(text: str, limits: Limits) -> dict[str, Any]:
    """``--edit``: a JSON object within the limits (finite numbers, bounded size and depth), else exit 2."""
    try:
        edited = parse_json_strict(
            text, limit_chars=limits.max_edit_chars, limit_depth=limits.max_json_depth, what="--edit"
        )
    except LimitError as exc:
        raise _Exit(EXIT_USAGE, f"{exc} (GOLDFIVE_LIMIT_MAX_EDIT_CHARS / GOLDFIVE_LIMIT_MAX_JSON_DEPTH)") from None
    except ValueError as exc:
        raise _Exit(EXIT_USAGE, f"--edit must be a JSON object: {inert(str(exc), 200)}") from None
    if not isinstance(edited, dict):
        raise _Exit(EXIT_USAGE, f"--edit must be a JSON object, got {type(edited).__name__}")
    return edited


def _say_ack(shown: Mapping[str, Any], out: _Out) -> int:
    """An agent's ack (``result``, ``detail``, ``control_id``, ``data``): "ok: ..." or "refused: ...", exit 0 or 1."""
    ok = shown.get("result") == "SUCCESS"
    detail = str(shown.get("detail", ""))
    label = "ok" if ok else "refused"
    if detail.lower().startswith(f"{label}:"):  # the agent already said it: never "refused: refused: ..."
        detail = detail[len(label) + 1 :].lstrip()
    out.emit(f"{label}: {inert(detail, _FULL)}", dict(shown))
    return EXIT_OK if ok else EXIT_FAILURE


def _say_audit(report: Mapping[str, Any], out: _Out) -> int:
    """An audit chain check (``ok``, ``rows``, ``head_hash``, ``problems``): exit 0 when intact, 1 when not."""
    if report["ok"]:
        out.emit(f"ok: the audit chain of {report['rows']} events is intact (head {report['head_hash'][:16]}…)", report)
        return EXIT_OK
    text = "TAMPERED: the audit chain is broken\n" + "\n".join(f"  {inert(p, 400)}" for p in report["problems"])
    out.emit(text, report)
    return EXIT_FAILURE
