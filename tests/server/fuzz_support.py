"""Junk for every route of ``goldfive serve``: a seeded request fuzzer over a real socket, and a live server.

Shared by tests/server/test_server_fuzz.py (a few thousand requests) and bench/fuzz_api.py (10,000).
The route list is read from the app's own route table, so a new route is fuzzed without being named
here. Each request picks a route, a credential (none, malformed, wrong, each role, a web session with
and without its CSRF token), path ids (real and junk), query parameters and headers (odd digits,
high-bit bytes, huge numbers) and, for writes, a body: the route's valid body mutated (nesting 1,000
deep, NaN/Infinity/1e999, 5,000-digit integers, lone surrogates, wrong types, extra fields, bad
UTF-8, truncation, oversize), or a head promising a body that the client abandons half-way.
Requests are raw HTTP/1.1 over asyncio sockets so nothing normalises the junk on the way.

NUL characters are in the junk too (a person's is refused by name, a model's is stored as ␀: issue #27,
hole 6, tested on its own in test_server_nul.py and test_store_nul.py).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import dataclasses
import json
import logging
import random
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.routing import Mount, Route

from goldfive_core.pb.v1 import events_pb2
from goldfive_core.server import ServerConfig, create_app
from goldfive_core.server.run import uvicorn_config
from goldfive_core.signing import load_or_create_signing_key
from goldfive_core.store import Store
from goldfive_core.store.users import add_user

ORIGIN_HOST = "127.0.0.1"


# -- a live server ------------------------------------------------------------------------------------------------
class LogRecorder(logging.Handler):
    """Every log record of the process while attached (root and uvicorn's own loggers, which do not propagate)."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.records: list[logging.LogRecord] = []
        self._records_lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        with self._records_lock:
            self.records.append(record)

    def tracebacks(self) -> list[str]:
        """Records that carry an exception or print a traceback: what an operator would see as a crash."""
        found = []
        with self._records_lock:
            records = list(self.records)
        for r in records:
            text = r.getMessage()
            if r.exc_info or "Traceback" in text:
                found.append(f"{r.name}: {text[:300]} {r.exc_info[1]!r}" if r.exc_info else f"{r.name}: {text[:300]}")
        return found

    @contextlib.contextmanager
    def attached(self) -> Iterator[LogRecorder]:
        loggers = [logging.getLogger(), logging.getLogger("uvicorn")]  # uvicorn.error propagates to uvicorn
        for lg in loggers:
            lg.addHandler(self)
        old = logging.getLogger().level
        logging.getLogger().setLevel(min(old, logging.INFO) if old else logging.INFO)
        try:
            yield self
        finally:
            for lg in loggers:
                lg.removeHandler(self)
            logging.getLogger().setLevel(old)


@dataclasses.dataclass
class LiveServer:
    """``goldfive serve``'s app under uvicorn (with serve's own settings) on 127.0.0.1, in a thread."""

    app: Starlette
    store: Store
    port: int
    log: LogRecorder
    tokens: dict[str, str]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def live_server(store: Store, key_dir: Path, **config: Any) -> Iterator[LiveServer]:
    """Users ana (approver), vic (viewer), root (admin), bot and bot2 (agents), victim (for admin actions)."""
    signer, _ = load_or_create_signing_key(key_dir / "decision-key.pem")
    settings: dict[str, Any] = {"decide_timeout_s": 1.0, "control_timeout_s": 1.0, **config}
    app = create_app(store, ServerConfig(signer=signer, **settings))
    tokens = {
        name: add_user(store, name, role).token
        for name, role in (
            ("ana", "approver"),
            ("vic", "viewer"),
            ("root", "admin"),
            ("bot", "agent"),
            ("bot2", "agent"),
            ("victim", "approver"),
        )
    }
    port = free_port()
    server = uvicorn.Server(uvicorn_config(app, host="127.0.0.1", port=port))
    recorder = LogRecorder()
    with recorder.attached():
        thread = threading.Thread(target=server.run, name="fuzz-serve", daemon=True)
        thread.start()
        deadline = time.monotonic() + 20
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the server did not start")
            time.sleep(0.01)
        try:
            yield LiveServer(app, store, port, recorder, tokens)
        finally:
            server.should_exit = True
            thread.join(15)


# -- raw HTTP ------------------------------------------------------------------------------------------------------
@dataclasses.dataclass
class Answer:
    status: int  # 0: no answer (the client hung up on purpose, or the server closed the connection)
    body: bytes
    headers: dict[str, str]

    def json(self) -> Any:
        return json.loads(self.body)


async def send_raw(port: int, head: bytes, body: bytes = b"", *, abandon_after: int | None = None) -> Answer:
    """Send ``head`` + ``body`` on a new connection; read the answer's head and body (not an event stream's).

    ``abandon_after``: send that many bytes of the body, then close (a client disconnecting mid-body).
    """
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(head)
        if abandon_after is not None:
            writer.write(body[:abandon_after])
            await writer.drain()
            return Answer(0, b"", {})
        writer.write(body)  # not drained: a server that answers before reading it all (413) is still heard
        return await asyncio.wait_for(read_answer(reader), 30)
    except (ConnectionError, asyncio.IncompleteReadError):
        return Answer(0, b"", {})
    finally:
        writer.close()
        with contextlib.suppress(ConnectionError, OSError):
            await writer.wait_closed()


async def read_answer(reader: asyncio.StreamReader) -> Answer:
    raw = await reader.readuntil(b"\r\n\r\n")
    lines = raw.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        if ":" in line:
            name, _, value = line.partition(":")
            headers[name.strip().lower()] = value.strip()
    if "text/event-stream" in headers.get("content-type", ""):
        return Answer(status, b"", headers)  # a stream that would run forever: the head is the answer
    if "content-length" in headers:
        body = await reader.readexactly(int(headers["content-length"]))
    elif headers.get("transfer-encoding") == "chunked":
        body = await _read_chunked(reader)
    else:
        body = await reader.read()
    return Answer(status, body, headers)


async def _read_chunked(reader: asyncio.StreamReader) -> bytes:
    out = b""
    while True:
        size = int((await reader.readline()).strip() or b"0", 16)
        if size == 0:
            await reader.readline()
            return out
        out += await reader.readexactly(size)
        await reader.readline()


def http_head(method: str, target: str, headers: Sequence[tuple[str, bytes]], *, length: int | None) -> bytes:
    lines = [f"{method} {target} HTTP/1.1".encode(), f"Host: {ORIGIN_HOST}".encode(), b"Connection: close"]
    lines += [name.encode() + b": " + value for name, value in headers]
    if length is not None:
        lines.append(f"Content-Length: {length}".encode())
    return b"\r\n".join(lines) + b"\r\n\r\n"


# -- the junk ------------------------------------------------------------------------------------------------------
class Raw:
    """JSON text put into a body verbatim (what no JSON encoder would write)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Raw({self.text[:30]!r})"


def dump(value: Any) -> str:
    """JSON text of ``value``, with :class:`Raw` pieces verbatim."""
    if isinstance(value, Raw):
        return value.text
    if isinstance(value, dict):
        return "{" + ",".join(f"{json.dumps(str(k))}:{dump(v)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(dump(v) for v in value) + "]"
    return json.dumps(value)


DEEP = 1000
JUNK_TEXT = (
    "",
    " ",
    "x" * 70_000,
    "\u202eevil\u202c",
    "\u200b",
    "😀" * 3,
    "\x1b[31mred",
    "../../etc/passwd",
    "<script>alert(1)</script>",
    "'; DROP TABLE gf_runs; --",
    "%ff%fe",
    "²",
    "١٢",
    "a\u0000b",
    "\u0000",
)
JUNK_JSON = (
    Raw("NaN"),
    Raw("Infinity"),
    Raw("-Infinity"),
    Raw("1e999"),
    Raw("-1e999"),
    Raw("1e-999"),
    Raw("9" * 5000),
    Raw("-" + "9" * 30),
    Raw(str(2**64)),
    Raw(str(2**63)),
    Raw("-0"),
    Raw('"\\ud800"'),
    Raw('"a\\udfffb"'),
    Raw('"\\ud83d"'),
    Raw("[" * DEEP + "]" * DEEP),
    Raw('{"a":' * DEEP + "1" + "}" * DEEP),
    None,
    True,
    False,
    0,
    -1,
    1.5,
    2**31,
    [],
    {},
    [1, "a", None],
    {"a": {"b": []}},
    *JUNK_TEXT,
)
JUNK_BODIES: tuple[bytes, ...] = (
    b"",
    b"[]",
    b'"text"',
    b"1",
    b"null",
    b"{",
    b'{"a": ',
    b"{not json}",
    b"\xff\xfe{}",
    b'{"reason": "\xed\xa0\x80"}',  # an encoded surrogate: not UTF-8
    b'{"reason": "\xc0\xaf"}',  # overlong
    b"\xef\xbb\xbf{}",  # a byte-order mark
    b"[" * DEEP + b"]" * DEEP,
    b"[" * 100_000,
    b'{"a":1,"a":2}',
    b" " * 70_000,
    b"x" * (5 * 1024 * 1024),
)
JUNK_IDS = (
    "nope",
    "%ff",
    "%ed%a0%80",
    "%c0%af",
    "..",
    "%2e%2e",
    "a" * 5000,
    "%e2%80%ae",
    "%f0%9f%98%80",
    "%",
    "%zz",
    "%22%27%3c",
    "-1",
    "%c2%b2",
)
JUNK_QUERY = ("", "²", "١٢", "-1", "0", "1", "9" * 5000, "1e3", " 5", "0x10", "nan", "%", "%ff", "true", "x" * 3000)
QUERY_NAMES = ("after", "limit", "offset", "status", "run", "live", "all", "tool", "agent", "rule", "endpoint")
JUNK_HEADERS: tuple[tuple[str, bytes], ...] = (
    ("Last-Event-ID", b"\xb2"),
    ("X-Goldfive-Pass", b"p1.\xb2\xb2.ab"),
    ("Last-Event-ID", "²".encode()),
    ("Last-Event-ID", b"9" * 5000),
    ("Last-Event-ID", b"-5"),
    ("Last-Event-ID", b"12"),
    ("Content-Type", b"text/plain"),
    ("Content-Type", b"application/json; charset=latin-1"),
    ("Origin", b"null"),
    ("Origin", b"http://evil.test"),
    ("Origin", "http://\xe9vil".encode("latin-1")),
    ("Sec-Fetch-Site", b"cross-site"),
    ("Sec-Fetch-Site", b"\xff"),
    ("X-CSRF-Token", b"\xe9\xe9"),
    ("X-CSRF-Token", b""),
    ("Cookie", b"gf_session=\xff\xfe.\xe9"),
    ("Cookie", b"gf_session=" + b"a" * 4000),
    ("Cookie", b"gf_session=abc.def; other=1"),
    ("Accept", b"text/event-stream"),
    ("Accept-Encoding", b"gzip, \xff"),
    ("Authorization", b"Bearer \xe9\xe9"),
    ("Authorization", b"Basic YWRtaW46eA=="),
    ("Authorization", b"Bearer " + b"g" * 5000),
    ("Authorization", b"bearer"),
)


@dataclasses.dataclass
class Seeds:
    """Real ids for path parameters and valid bodies, so junk also reaches past the lookups."""

    targets: list[str]
    runs: list[str]
    agent_runs: list[str]
    calls: list[str]
    cookies: list[tuple[str, str]]  # (cookie header value, csrf)
    tokens: dict[str, str]


def seed(live: LiveServer) -> Seeds:
    """Two runs of requests nobody waits for (their runs look stale: answers come at once, never 504)."""
    store = live.store
    store.stale_after_ms = 1  # every run looks stale to the server: no decision or control waits for an agent
    targets, runs = [], []
    for r in range(2):
        run_id = f"fz-run-{r}"
        runs.append(run_id)
        events = [_event(run_id, 0, "run_started", events_pb2.RunStarted(adapter="callable"))]
        for i in range(6):
            target = f"fz-{r}-{i}"
            targets.append(target)
            req = events_pb2.ApprovalRequested(
                target_id=target,
                kind="tool" if i % 2 else "task",
                prompt=f"pay {i}?",
                task_id=target,
                metadata={"tool_name": "transfer", "args_json": json.dumps({"amount": i})},
            )
            events.append(_event(run_id, i + 1, "approval_requested", req))
        store.append_events(events, pid=1, host="fuzz")
    return Seeds(
        targets=targets,
        runs=runs,
        agent_runs=[f"fz-agent-run-{i}" for i in range(3)],
        calls=["fz-call-1", "fz-call-2"],
        cookies=[],
        tokens=live.tokens,
    )


async def log_in(live: LiveServer, seeds: Seeds, sessions: int = 8) -> None:
    """Web sessions of ana (cookie + CSRF token), several: a fuzzed logout ends one at a time."""
    for _ in range(sessions):
        body = json.dumps({"name": "ana", "token": live.tokens["ana"]}).encode()
        head = http_head("POST", "/api/login", [("Content-Type", b"application/json")], length=len(body))
        answer = await send_raw(live.port, head, body)
        assert answer.status == 200, answer
        cookie = answer.headers["set-cookie"].split(";", 1)[0]
        seeds.cookies.append((cookie, answer.json()["csrf"]))


def _event(run_id: str, seq: int, field: str, payload: Any) -> events_pb2.Event:
    event = events_pb2.Event(event_id=f"ev-{run_id}-{seq}", run_id=run_id, sequence=seq)
    event.emitted_at.FromMilliseconds(1_700_000_000_000 + seq)
    getattr(event, field).CopyFrom(payload)
    return event


def routes_of(app: Starlette) -> list[tuple[str, str]]:
    """(method, path template) of every route in the app's route table (a Mount: one GET under it)."""
    found = []
    for route in app.routes:
        if isinstance(route, Route):
            found += [(m, route.path) for m in sorted(route.methods or ()) if m != "HEAD"]
        elif isinstance(route, Mount):
            found.append(("GET", route.path + "/{path}"))
    return found


def _agent_event(rng: random.Random, seeds: Seeds) -> dict[str, Any]:
    run = rng.choice(seeds.agent_runs)
    seq = rng.randrange(0, 50)
    event: dict[str, Any] = {"event_id": f"ev-fz-{rng.randrange(10**9)}", "run_id": run, "sequence": seq}
    kind = rng.choice(("run_started", "approval_requested", "task_started", "drift_detected", "approval_granted"))
    if kind == "approval_requested":
        event[kind] = {
            "target_id": f"fz-agent-{rng.randrange(100)}",
            "kind": "tool",
            "prompt": "ok?",
            "metadata": {"tool_name": "t", "args_json": "{}"},
        }
    elif kind == "drift_detected":
        event[kind] = {"kind": "LOOPING_TOOL_CALL", "severity": "WARNING", "detail": "d"}
    elif kind == "approval_granted":
        event[kind] = {"target_id": rng.choice(seeds.targets)}
    else:
        event[kind] = {"task_id": "t1"} if kind == "task_started" else {"adapter": "callable"}
    return event


def valid_body(method: str, path: str, rng: random.Random, seeds: Seeds) -> dict[str, Any] | None:
    """A body the route would accept (None: the route reads none)."""
    if method != "POST":
        return None
    agent_run = rng.choice(seeds.agent_runs)
    last = path.rsplit("/", 1)[-1]
    bodies: dict[str, dict[str, Any]] = {
        "login": {"name": rng.choice(("ana", "nobody")), "token": "gf_wrong.wrong"},
        "logout": {},
        "approve": {"reason": "ok", "edited_args": {"amount": rng.randrange(10)}},
        "reject": {"reason": "no"},
        "revoke": {"reason": "done"},
        "pause": {"reason": "wait"},
        "cancel": {"reason": "stop"},
        "resume": {},
        "steer": {"text": "go left"},
        "users": {"name": f"u{rng.randrange(10**6)}", "role": "viewer", "groups": ["g"]},
        "{action}": {"add": ["g1"], "remove": []},
        "events": {"events": [_agent_event(rng, seeds) for _ in range(rng.randrange(1, 3))], "pid": 7, "host": "h"},
        "heartbeat": {"run_ids": [agent_run]},
        "acks": {"endpoint": "e1", "acks": [{"inbox_id": rng.randrange(5), "ack": {"control_id": "c", "result": 1}}]},
        "executing": {"run_id": agent_run, "args_digest": "", "pid": 7, "host": "h"},
        "done": {"result_json": "{}"},
    }
    return dict(bodies.get(last, {}))


def _mutate_value(value: Any, rng: random.Random) -> Any:
    """``value`` with one junk value somewhere inside it (or in its place)."""
    if isinstance(value, dict) and value and rng.random() < 0.8:
        key = rng.choice(list(value))
        return {**value, key: _mutate_value(value[key], rng)}
    if isinstance(value, list) and value and rng.random() < 0.8:
        index = rng.randrange(len(value))
        return [*value[:index], _mutate_value(value[index], rng), *value[index + 1 :]]
    return rng.choice(JUNK_JSON)


def body_for(method: str, path: str, rng: random.Random, seeds: Seeds) -> tuple[bytes, str]:
    """A (mutated) body and a word on what was done to it."""
    base = valid_body(method, path, rng, seeds)
    if base is None:
        return (b"", "none") if rng.random() < 0.8 else (rng.choice(JUNK_BODIES[:12]), "junk body on a read")
    roll = rng.random()
    if roll < 0.12:
        return dump(base).encode(), "valid"
    if roll < 0.55:
        return dump(_mutate_value(base, rng)).encode(), "a junk value"
    if roll < 0.65:
        return dump({**base, rng.choice(("x", "extra", "__proto__", "decided_by")): rng.choice(JUNK_JSON)}).encode(), (
            "an extra field"
        )
    if roll < 0.75:
        return dump(_mutate_value(_mutate_value(base, rng), rng)).encode(), "two junk values"
    if roll < 0.85:
        text = dump(base).encode()
        return text[: rng.randrange(max(1, len(text)))], "truncated"
    return rng.choice(JUNK_BODIES), "a junk body"


def _path(template: str, rng: random.Random, seeds: Seeds) -> str:
    real = {
        "target_id": seeds.targets,
        "run_id": seeds.runs + seeds.agent_runs,
        "grant_id": ["g-1"],
        "name": ["victim", "nobody"],
        "action": ["rotate", "disable", "groups", "groups", "nope"],
        "call_id": seeds.calls,
        "path": ["app.js", "index.html", "nope.css"],
    }

    def fill(match: re.Match[str]) -> str:
        name = match.group(1)
        if rng.random() < 0.6 and name in real:
            return urllib.parse.quote(rng.choice(real[name]), safe="")
        return rng.choice(JUNK_IDS)

    return re.sub(r"\{(\w+)\}", fill, template)


def _query(rng: random.Random) -> str:
    pairs = []
    for _ in range(rng.choice((0, 0, 1, 2, 3))):
        name = rng.choice(QUERY_NAMES)
        value = rng.choice(JUNK_QUERY)
        raw = value if value.startswith("%") and rng.random() < 0.5 else urllib.parse.quote(value, safe="")
        pairs.append(f"{name}={raw}")
    return ("?" + "&".join(pairs)) if pairs else ""


CREDENTIALS = ("none", "junk", "ana", "vic", "root", "bot", "bot2", "cookie", "cookie-no-csrf")


def _auth_headers(rng: random.Random, seeds: Seeds) -> tuple[str, list[tuple[str, bytes]]]:
    who = rng.choice(CREDENTIALS)
    if who == "none":
        return who, []
    if who == "junk":
        return who, [rng.choice([h for h in JUNK_HEADERS if h[0] in ("Authorization", "Cookie")])]
    if who.startswith("cookie"):
        cookie, csrf = rng.choice(seeds.cookies)
        headers = [("Cookie", cookie.encode()), ("Origin", f"http://{ORIGIN_HOST}".encode())]
        if who == "cookie":
            headers.append(("X-CSRF-Token", csrf.encode()))
        return who, headers
    return who, [("Authorization", f"Bearer {seeds.tokens[who]}".encode())]


@dataclasses.dataclass
class Case:
    method: str
    route: str
    target: str
    who: str
    what: str
    head: bytes
    body: bytes
    abandon_after: int | None = None


def make_case(rng: random.Random, routes: Sequence[tuple[str, str]], seeds: Seeds) -> Case:
    method, route = rng.choice(routes)
    target = _path(route, rng, seeds) + _query(rng)
    who, headers = _auth_headers(rng, seeds)
    headers.append(("Content-Type", b"application/json"))
    if rng.random() < 0.25:
        headers.append(rng.choice(JUNK_HEADERS))
    body, what = body_for(method, route, rng, seeds)
    if method == "POST" and rng.random() < 0.05:  # the client promises a body and hangs up half-way
        size = max(len(body), 10)
        head = http_head(method, target, headers, length=size)
        return Case(method, route, target, who, "disconnect mid-body", head, body or b"{" * 10, size // 2)
    head = http_head(method, target, headers, length=len(body) if (body or method == "POST") else None)
    return Case(method, route, target, who, what, head, body)


@dataclasses.dataclass
class Report:
    requests: int = 0
    statuses: collections.Counter[int] = dataclasses.field(default_factory=collections.Counter)
    per_route: collections.Counter[str] = dataclasses.field(default_factory=collections.Counter)
    failures: list[str] = dataclasses.field(default_factory=list)
    """Answers >= 500, a 4xx that says nothing, or a traceback in an answer."""
    disconnects: int = 0
    tracebacks: list[str] = dataclasses.field(default_factory=list)

    @property
    def by_class(self) -> dict[str, int]:
        classes: collections.Counter[str] = collections.Counter()
        for status, n in self.statuses.items():
            classes["none (client hung up)" if status == 0 else f"{status // 100}xx"] += n
        return dict(sorted(classes.items()))

    @property
    def server_errors(self) -> int:
        return sum(n for status, n in self.statuses.items() if status >= 500)

    def summary(self) -> str:
        statuses = ", ".join(f"{s}: {n}" for s, n in sorted(self.statuses.items()))
        return (
            f"{self.requests} requests ({self.disconnects} abandoned mid-body); by class {self.by_class}; "
            f">=500: {self.server_errors}; tracebacks in the log: {len(self.tracebacks)}; statuses {statuses}"
        )


def _judge(case: Case, answer: Answer, report: Report) -> None:
    report.statuses[answer.status] += 1
    problem = ""
    if answer.status >= 500:
        problem = "a server error"
    elif b"Traceback" in answer.body:
        problem = "a traceback in the answer"
    elif 400 <= answer.status < 500 and answer.status != 408:
        try:
            said = answer.json().get("error")
        except (ValueError, AttributeError):
            said = answer.body.decode("latin-1").strip()  # uvicorn's own "Invalid HTTP request received."
        if not said:
            problem = "a 4xx that does not say what is wrong"
    if problem:
        body = answer.body[:200].decode("utf-8", "replace")
        report.failures.append(
            f"{problem}: {case.method} {case.target[:120]} as {case.who} ({case.what}; body {case.body[:80]!r}) "
            f"-> {answer.status} {body}"
        )


async def fuzz(live: LiveServer, seeds: Seeds, *, requests: int, seed_value: int, concurrency: int = 6) -> Report:
    """Send ``requests`` seeded junk requests to every route of ``live``; the report counts and lists failures."""
    rng = random.Random(seed_value)
    routes = routes_of(live.app)
    cases = [make_case(rng, routes, seeds) for _ in range(requests)]
    report = Report()
    queue: asyncio.Queue[Case] = asyncio.Queue()
    for case in cases:
        queue.put_nowait(case)

    async def worker() -> None:
        while not queue.empty():
            case = queue.get_nowait()
            report.requests += 1
            report.per_route[f"{case.method} {case.route}"] += 1
            answer = await send_raw(live.port, case.head, case.body, abandon_after=case.abandon_after)
            if case.abandon_after is not None:
                report.disconnects += 1
                report.statuses[0] += 1
                continue
            _judge(case, answer, report)

    await asyncio.gather(*(worker() for _ in range(concurrency)))
    report.tracebacks = live.log.tracebacks()
    return report
