"""``goldfive answer ID field=value ...`` (or ``--decline`` / ``--cancel``): answer a request for input.

The values are read by the form's schema (an ``integer`` field takes ``guests=4``, a ``boolean`` one ``yes``/
``no``/``true``/``false``, a multi-select ``a,b``); the answer is checked against the schema before anything is
sent, and again where it is decided (the store, or ``goldfive serve``) and by the agent. A field the form does not
have, a value of the wrong type or out of bounds is refused with the field named (exit 2).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .cli_text import EXIT_USAGE, _Exit
from .elicitation import answer_problem

__all__ = ["Plan", "add_parser", "plan"]

Plan = tuple[bool, "dict[str, Any] | None", str]
"""What to send: approve?, the content (accept), the rejection's answer ("cancel" or "")."""

_TRUE = ("true", "yes", "y", "1", "on")
_FALSE = ("false", "no", "n", "0", "off")


def add_parser(cmd: Callable[[str, str], argparse.ArgumentParser]) -> None:
    """``goldfive answer`` on the one parser (cli.py's COMMANDS table names it)."""
    p = cmd("answer", "answer a request for input (a form): field=value ..., or --decline / --cancel")
    p.add_argument("id", help="the request's target id (goldfive pending)")
    p.add_argument("values", nargs="*", metavar="FIELD=VALUE", help="the form's values (see goldfive show ID)")
    choice = p.add_mutually_exclusive_group()
    choice.add_argument("--decline", action="store_true", help="say no: the asker is told 'decline'")
    choice.add_argument("--cancel", action="store_true", help="dismiss the form: the asker is told 'cancel'")
    p.add_argument("--reason", default="", help="a note recorded with the answer")
    p.add_argument("--by", help="who answers (default: $GOLDFIVE_USER or your login)")
    p.add_argument("--digest", help="refuse unless the request still has this digest (from 'show')")
    p.add_argument("--run", help="the run, when the id is open in several")
    p.add_argument("--policy", metavar="FILE", help="who may decide comes from this policy (env GOLDFIVE_POLICY)")


def plan(args: argparse.Namespace, kind: str, form: Mapping[str, Any] | None) -> Plan:
    """What ``args`` answer to a request of ``kind`` with ``form``; a usage error (exit 2) names what is wrong."""
    if kind != "input":
        raise _Exit(EXIT_USAGE, f"{args.id!r} is a {kind} approval, not a request for input: use approve or reject")
    if args.decline or args.cancel:
        if args.values:
            raise _Exit(EXIT_USAGE, "--decline and --cancel take no FIELD=VALUE")
        return False, None, "cancel" if args.cancel else ""
    if form is None:
        raise _Exit(EXIT_USAGE, f"{args.id!r} carries no readable form; answer with --decline or --cancel")
    content = values(args.values, form)
    problem = answer_problem(form, content)
    if problem is not None:
        raise _Exit(EXIT_USAGE, f"refused: {problem.message}; nothing was sent")
    return True, content, ""


def values(pairs: Sequence[str], form: Mapping[str, Any]) -> dict[str, Any]:
    """``FIELD=VALUE`` words as the form's typed values (a word the form cannot read is left a string)."""
    props = form.get("properties", {})
    content: dict[str, Any] = {}
    for pair in pairs:
        name, sep, text = pair.partition("=")
        if not sep or not name:
            raise _Exit(EXIT_USAGE, f"values are FIELD=VALUE, got {pair[:80]!r}")
        if name in content:
            raise _Exit(EXIT_USAGE, f"{name!r} is given twice")
        prop = props.get(name)
        content[name] = _typed(prop if isinstance(prop, Mapping) else {}, text)
    return content


def _typed(prop: Mapping[str, Any], text: str) -> Any:
    kind = prop.get("type")
    if kind == "boolean":
        word = text.strip().lower()
        return True if word in _TRUE else False if word in _FALSE else text
    if kind in ("integer", "number"):
        try:
            return int(text) if kind == "integer" else float(text)
        except ValueError:
            return text
    if kind == "array":
        return [part.strip() for part in text.split(",") if part.strip()]
    return text
