// goldfive inbox: one queue of everything waiting, live over Server-Sent Events.
// Plain JavaScript, no build step, no third-party code. Every piece of text that comes from the server
// (and so possibly from an agent) is put on the page as text nodes, never parsed as HTML, with the characters a
// person cannot see shown as marked tokens (text.js).
"use strict";

(function () {
  const MAX_PROMPT = 5000; // characters of agent text shown on a card before its "Show all"
  const PAGE = 200; // approvals fetched per page
  const T = window.goldfiveText;

  const $ = (sel, root) => (root || document).querySelector(sel);
  const state = {
    me: null, // {name, role}
    csrf: "",
    cards: new Map(), // key run_id/target_id -> {item, node}
    pending: [],
    total: 0,
    source: null,
    runId: "",
    runLocal: new Map(), // run_id -> {state, afterMs}: what this page last did to the run
    refreshGen: 0,
    runGen: 0,
    focus: "", // a target id from a #/approvals/ link, focused once its card is shown
    selected: new Set(), // keys of the cards selected for Approve selected / Reject selected
    escalations: new Map(), // run_id -> {run, node}: runs paused by the ladder for a person (level 4)
    historyOffset: 0,
    bulkBusy: false,
  };

  // -- small helpers ------------------------------------------------------------------------------
  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [k, v] of Object.entries(props || {})) {
      if (k === "class") node.className = v;
      else if (k === "text") node.append(T.visible(v));
      else if (k === "title" || k.startsWith("aria-")) node.setAttribute(k, T.plain(v));
      else if (k.startsWith("data-") || k === "href" || k === "role") node.setAttribute(k, v);
      else node[k] = v;
    }
    for (const c of children) if (c != null) node.append(typeof c === "string" ? T.visible(c) : c);
    return node;
  }
  // Replace what `node` shows with `text` (hidden characters as tokens; `lines`: keep line breaks and tabs).
  function show(node, text, lines) {
    node.textContent = "";
    node.append(T.visible(text, lines));
  }
  function clip(text, n) {
    text = String(text == null ? "" : text);
    return text.length > n ? T.cut(text, n) + ` … (${text.length - n} more characters not shown)` : text;
  }
  function snake(name) {
    return name.replace(/[A-Z]/g, (c) => "_" + c.toLowerCase());
  }
  function pick(obj, name) {
    if (!obj) return undefined;
    if (name in obj) return obj[name];
    const camel = name.replace(/_([a-z])/g, (_, c) => c.toUpperCase());
    return obj[camel];
  }
  function ms(value) {
    if (value == null || value === "") return 0;
    if (typeof value === "number") return value;
    const n = Number(value);
    if (!Number.isNaN(n)) return n;
    const parsed = Date.parse(value);
    return Number.isNaN(parsed) ? 0 : parsed;
  }
  function clock(t) {
    if (!t) return "—";
    const d = new Date(t);
    const today = new Date();
    const time = d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit" });
    if (d.toDateString() === today.toDateString()) return time;
    return d.toLocaleDateString([], { month: "short", day: "numeric" }) + " " + time;
  }
  function ago(t) {
    const s = Math.max(0, Math.round((Date.now() - t) / 1000));
    if (s < 60) return `${s}s ago`;
    if (s < 3600) return `${Math.floor(s / 60)}m ago`;
    return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m ago`;
  }
  function left(msLeft) {
    const s = Math.ceil(msLeft / 1000);
    if (s >= 3600) return `${Math.floor(s / 3600)}h ${String(Math.floor((s % 3600) / 60)).padStart(2, "0")}m`;
    return `${Math.floor(s / 60)}:${String(s % 60).padStart(2, "0")}`;
  }
  function toast(text, bad) {
    const node = el("div", { class: "toast" + (bad ? " bad" : ""), text: clip(text, 600) });
    $("#toasts").append(node);
    setTimeout(() => node.remove(), bad ? 9000 : 6000);
  }
  // The call's arguments from the record's own JSON text (args_json, every number exact) and whether this page
  // holds them whole; `why` says, in words for the card, why not.
  function readArgs(item) {
    const text = pick(item, "args_json");
    if (typeof text === "string" && text !== "") {
      const { value, problem, inexact } = T.parseExact(text);
      if (problem)
        return { value: text, whole: false, why: `this page cannot read the arguments as JSON (${clip(problem, 200)})` };
      if (inexact)
        return { value, whole: false, why: `this browser cannot show the number ${clip(inexact, 60)} exactly` };
      return { value, whole: true, why: "" };
    }
    const args = pick(item, "args");
    if (args == null && !pick(item, "args_digest")) return { value: null, whole: true, why: "" }; // nothing to run
    return { value: args, whole: false, why: "the server sent this request without the arguments as recorded" };
  }
  function parsedOrText(text) {
    if (!text) return null;
    const { value, problem } = T.parseExact(text);
    return problem ? text : value;
  }
  function short(id) {
    id = String(id || "");
    return id.length > 16 ? id.slice(0, 14) + "…" : id;
  }
  function editable(value) {
    if (value == null) return "";
    if (typeof value === "string") return value;
    return T.editableJson(value);
  }
  function canDecide() {
    return state.me && state.me.role !== "viewer";
  }

  // -- the API --------------------------------------------------------------------------------------
  class ApiError extends Error {
    constructor(status, message, body, retryAfterS) {
      super(message);
      this.status = status;
      this.body = body;
      this.retryAfterS = retryAfterS || 0;
    }
  }
  async function api(method, path, body) {
    const headers = { Accept: "application/json" };
    if (method !== "GET") {
      headers["Content-Type"] = "application/json";
      if (state.csrf) headers["X-CSRF-Token"] = state.csrf;
    }
    let response;
    try {
      response = await fetch(path, {
        method,
        headers,
        credentials: "same-origin",
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    } catch (err) {
      // Nothing is queued or retried: say so, so a person does not wait for a click that was never sent.
      throw new ApiError(0, "the server cannot be reached, so this was not sent; try again once the page says live", null);
    }
    let data = null;
    try {
      data = await response.json();
    } catch (_) {
      data = null;
    }
    if (response.status === 401 && path !== "/api/login") {
      // Several requests in flight may each get the 401: only the first shows the form, and its words stay.
      if (state.me || $("#view-login").hidden) showLogin(state.me ? "Your session ended; sign in again." : "");
      throw new ApiError(401, "not signed in", data);
    }
    if (!response.ok) {
      const why = (data && (data.error || data.detail || data.message)) || response.statusText;
      const retryAfterS = Number.parseInt(response.headers.get("Retry-After") || "", 10);
      throw new ApiError(response.status, typeof why === "string" ? why : JSON.stringify(why), data, retryAfterS);
    }
    return data || {};
  }
  function rememberSession(data) {
    const user = data.user || data;
    state.me = { name: pick(user, "name") || "", role: pick(user, "role") || "" };
    state.csrf = pick(data, "csrf_token") || pick(data, "csrf") || state.csrf;
  }

  // -- login ----------------------------------------------------------------------------------------
  function showLogin(message) {
    stopEvents();
    state.me = null;
    document.title = "Sign in · goldfive";
    for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== "view-login";
    $(".views").hidden = true;
    $(".who").hidden = true;
    show($("#login-error"), message || "");
    $("#login-name").focus();
  }
  async function login(event) {
    event.preventDefault();
    const name = $("#login-name").value.trim();
    const token = $("#login-token").value;
    $("#login-error").textContent = "";
    try {
      rememberSession(await api("POST", "/api/login", { name, token }));
    } catch (err) {
      show($("#login-error"), err.status === 429 ? tooMany(err.retryAfterS) : err.message);
      return;
    }
    $("#login-token").value = "";
    await start();
  }
  function tooMany(seconds) {
    if (!(seconds > 0)) return "Too many failed attempts; wait a little and try again.";
    const when = seconds < 90 ? `${seconds} s` : `${Math.ceil(seconds / 60)} minutes`;
    return `Too many failed attempts; try again in ${when}.`;
  }
  async function logout() {
    try {
      await api("POST", "/api/logout", {});
    } catch (_) {
      /* signed out locally either way */
    }
    state.csrf = "";
    showLogin("Signed out.");
  }

  // -- live events ------------------------------------------------------------------------------------
  const PAYLOADS = [
    "run_started", "task_started", "task_progress", "task_completed", "task_failed", "task_blocked",
    "task_cancelled", "drift_detected", "run_completed", "run_aborted", "approval_requested",
    "approval_granted", "approval_rejected", "approval_timed_out", "approval_cancelled", "decision_refused",
    "approval_voted", "approval_escalated", "grant_created", "grant_revoked", "policy_applied", "run_paused",
    "run_resumed", "execution_recorded", "reviewer_verdict", "run_step", "remote_approval_waiting",
  ];
  function payloadOf(ev) {
    for (const key of Object.keys(ev || {})) {
      const name = snake(key);
      if (PAYLOADS.includes(name)) return [name, ev[key] || {}];
    }
    return ["", {}];
  }
  function unwrap(data) {
    // The stream and the run's event list may wrap the event ({seq, event}) or send it bare.
    if (data && typeof data === "object" && data.event && typeof data.event === "object") return data.event;
    return data;
  }
  function startEvents() {
    stopEvents();
    const source = new EventSource("/api/events");
    state.source = source;
    const live = $("#live");
    source.onopen = () => {
      live.textContent = "live";
      live.className = "live on";
      refreshPending(); // catch up on anything missed while disconnected
    };
    source.onerror = () => {
      live.textContent = "disconnected · reconnecting…";
      live.className = "live off";
      if (source.readyState === EventSource.CLOSED && state.source === source) {
        // The browser gave up (e.g. the session ended: 401). Ask who we are (a 401 shows the sign-in form),
        // then open a new stream; it resumes after the last event seen (Last-Event-ID is per stream, so
        // refreshPending on open catches up instead).
        setTimeout(async () => {
          if (state.source !== source) return;
          try {
            await api("GET", "/api/me");
          } catch (_) {
            if (!state.me) return;
          }
          if (state.source === source) startEvents();
        }, 2000);
      }
    };
    const handle = (msg) => {
      let data;
      try {
        data = JSON.parse(msg.data);
      } catch (_) {
        return;
      }
      onEvent(unwrap(data));
    };
    source.onmessage = handle;
    for (const name of PAYLOADS) source.addEventListener(name, handle);
  }
  function stopEvents() {
    if (state.source) state.source.close();
    state.source = null;
  }
  let pendingTimer = 0;
  function refreshSoon() {
    clearTimeout(pendingTimer);
    pendingTimer = setTimeout(refreshPending, 80);
  }
  function onEvent(ev) {
    const [name, body] = payloadOf(ev);
    const runId = pick(ev, "run_id") || "";
    if (name === "approval_requested") refreshSoon();
    if (
      name === "approval_granted" || name === "approval_rejected" || name === "approval_cancelled" ||
      (name === "approval_timed_out" && !pick(body, "still_open"))
    ) {
      closeCard(runId, pick(body, "target_id") || "", name, body);
      refreshSoon();
    }
    if (name === "approval_timed_out" && pick(body, "still_open")) refreshSoon();
    if (name === "approval_voted" || name === "approval_escalated") refreshSoon(); // the card's count, escalation
    // A run escalated to a person, or one that no longer waits: its card comes or goes.
    if (name === "run_paused" || ((name === "run_resumed" || name === "run_completed" || name === "run_aborted") &&
      state.escalations.has(runId))) refreshSoon();
    if (name === "grant_created" || name === "grant_revoked") refreshGrants();
    if (runId && runId === state.runId) refreshRunSoon();
    if (location.hash.startsWith("#/history") && name.startsWith("approval_")) refreshHistory();
    if (location.hash.startsWith("#/runs") && !state.runId && (name.startsWith("run_") || name === "drift_detected"))
      refreshRuns();
  }

  // -- the queue --------------------------------------------------------------------------------------
  const key = (item) => `${pick(item, "run_id")}/${pick(item, "target_id")}`;

  async function refreshPending() {
    if (!state.me) return;
    const gen = ++state.refreshGen;
    let data, orphaned, escalated;
    try {
      [data, orphaned, escalated] = await Promise.all([
        api("GET", `/api/approvals?status=pending&limit=${PAGE}`),
        api("GET", `/api/approvals?status=orphaned&limit=50`),
        api("GET", `/api/runs?escalated=1&limit=${PAGE}`).catch(() => ({ runs: [] })), // an older server
      ]);
    } catch (err) {
      if (err.status !== 401) show($("#inbox-sub"), err.message);
      return;
    }
    if (gen !== state.refreshGen) return; // a newer refresh is on its way
    renderEscalations(escalated.runs || []);
    state.pending = data.approvals || [];
    state.total = data.total == null ? state.pending.length : data.total;
    state.orphaned = (orphaned.approvals || []).map((i) => ({ ...i, state: "orphaned" }));
    state.orphanedTotal = orphaned.total == null ? state.orphaned.length : orphaned.total;
    renderQueue();
  }

  function renderQueue() {
    const seen = new Set();
    const byExpiry = (a, b) =>
      (ms(pick(a, "expires_at_ms")) || Infinity) - (ms(pick(b, "expires_at_ms")) || Infinity);
    const place = (list, items, first) =>
      items.sort(byExpiry).forEach((item, at) => {
        const index = first + at; // after the escalation cards, which lead the queue
        const k = key(item);
        seen.add(k);
        let entry = state.cards.get(k);
        if (
          entry &&
          (pick(entry.item, "state") !== pick(item, "state") ||
            pick(entry.item, "args_digest") !== pick(item, "args_digest") ||
            pick(entry.item, "request_id") !== pick(item, "request_id") ||
            pick(entry.item, "args_json") !== pick(item, "args_json"))
        ) {
          // Its agent stopped or came back, or an approver of a quorum edited the arguments: rebuild the card,
          // so what it shows is what an approval here approves (the digest sent is the one shown). A selection
          // was of the card as it was: it does not carry over.
          entry.node.remove();
          state.selected.delete(k);
          entry = null;
        }
        if (!entry) {
          entry = { item, node: buildCard(item) };
          state.cards.set(k, entry);
        } else {
          entry.item = item;
          showPolicy(entry.node, item);
        }
        if (list.children[index] !== entry.node) list.insertBefore(entry.node, list.children[index] || null);
      });
    place($("#cards"), [...state.pending], state.escalations.size);
    place($("#orphaned-cards"), [...(state.orphaned || [])], 0);
    const n = state.orphanedTotal || 0;
    $("#orphaned").hidden = n === 0;
    $("#orphaned-count").textContent = String(n);
    for (const [k, entry] of state.cards) {
      if (!seen.has(k)) {
        entry.node.remove();
        state.cards.delete(k);
      }
    }
    focusLinkedCard();
    applyFilter();
    updateCount();
    updateBulk();
    renderRunCards();
  }

  // Runs the ladder paused for a person are cards too, first in the queue: the whole run waits on them.
  function renderEscalations(runs) {
    const seen = new Set();
    const list = $("#cards");
    runs.forEach((run, index) => {
      const runId = pick(run, "run_id") || "";
      const pause = pick(run, "paused") || {};
      seen.add(runId);
      let entry = state.escalations.get(runId);
      const sig = `${pause.drift_kind}|${pause.reason}|${pause.deadline_at_ms}`;
      if (entry && entry.sig !== sig) {
        entry.node.remove(); // escalated again, for another drift: a new card
        entry = null;
      }
      if (!entry) {
        entry = { run, sig, node: buildEscalation(run, pause) };
        state.escalations.set(runId, entry);
      }
      entry.run = run;
      if (list.children[index] !== entry.node) list.insertBefore(entry.node, list.children[index] || null);
    });
    for (const [runId, entry] of state.escalations) {
      if (seen.has(runId)) continue;
      const here = entry.node.contains(document.activeElement) || entry.node.classList.contains("current");
      const next = here ? neighbour(entry.node) : null;
      entry.node.remove();
      state.escalations.delete(runId);
      if (next) focusCard(next);
    }
  }

  function buildEscalation(run, pause) {
    const card = $("#escalation-template").content.firstElementChild.cloneNode(true);
    const q = (s) => $(s, card);
    const runId = pick(run, "run_id") || "";
    card.dataset.runId = runId;
    card.dataset.kind = "escalation";
    const what = String(pause.drift_kind || "drift").replace(/_/g, " ").toLowerCase();
    show(q(".drift-kind"), clip(what, 80));
    card.setAttribute("aria-label", T.plain(`run ${clip(runId, 80)} escalated: ${clip(what, 80)}`));
    show(q(".agent"), clip(pick(run, "agent") || pick(run, "adapter") || "—", 200));
    const link = q(".run-link");
    show(link, clip(runId, 80));
    link.href = `#/runs/${encodeURIComponent(runId)}`;
    show(q(".by"), clip(pause.by || "goldfive (the intervention ladder)", 120));
    q(".drift-reason").append(T.longText(pause.reason || "(no detail given)", MAX_PROMPT, { lines: true }));
    card.dataset.expires = String(ms(pause.deadline_at_ms));
    tick(card);
    const steerText = q(".steer-text");
    const steer = q(".esc-steer");
    steerText.addEventListener("input", () => (steer.disabled = !steerText.value.trim() || !canDecide()));
    q(".esc-resume").addEventListener("click", () => escalationControl(card, "resume", {}));
    steer.addEventListener("click", () => {
      const text = steerText.value.trim();
      if (text) escalationControl(card, "steer", { text });
    });
    steerText.addEventListener("keydown", (e) => {
      if (e.key === "Enter") steer.click();
    });
    q(".esc-cancel").addEventListener("click", () => {
      if (confirm("Cancel this run? The agent stops at its next step."))
        escalationControl(card, "cancel", { reason: "cancelled from the inbox" });
    });
    for (const b of card.querySelectorAll(".actions button")) b.disabled = b.disabled || !canDecide();
    steerText.disabled = !canDecide();
    card.addEventListener("focusin", () => markCurrent(card));
    return card;
  }

  async function escalationControl(card, verb, body) {
    const runId = card.dataset.runId;
    const buttons = card.querySelectorAll(".actions button");
    buttons.forEach((b) => (b.disabled = true));
    show($(".error", card), "");
    let ack;
    try {
      ack = await api("POST", `/api/runs/${encodeURIComponent(runId)}/${verb}`, body);
    } catch (err) {
      ack = { result: "FAILURE", detail: err.message };
    }
    if (ack.result === "SUCCESS") {
      toast(`${verb === "steer" ? "Steered" : verb === "resume" ? "Resumed" : "Cancelled"} run ${short(runId)}: ` +
        clip(ack.detail || "", 300));
      refreshSoon();
      return;
    }
    show($(".error", card), clip(ack.detail || "The server refused this.", 2000), true);
    buttons.forEach((b) => (b.disabled = !canDecide()));
    $(".esc-steer", card).disabled = !$(".steer-text", card).value.trim() || !canDecide();
  }

  function applyFilter() {
    // Client-side, over what is loaded: matches the tool, agent, run, session or request id.
    const words = $("#filter").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
    const kind = $("#kind-filter").value;
    for (const entry of state.cards.values()) {
      const hay = ["tool_name", "agent", "run_id", "session_id", "target_id"]
        .map((f) => String(pick(entry.item, f) || "").toLowerCase())
        .join(" ");
      const ofKind = !kind || (pick(entry.item, "kind") || "tool") === kind;
      entry.node.classList.toggle("filtered", !ofKind || !words.every((w) => hay.includes(w)));
    }
    for (const entry of state.escalations.values()) {
      const hay = ["run_id", "adapter", "agent"].map((f) => String(pick(entry.run, f) || "").toLowerCase()).join(" ");
      const ofKind = !kind || kind === "escalation";
      entry.node.classList.toggle("filtered", !ofKind || !words.every((w) => hay.includes(w)));
    }
  }

  function updateCount() {
    const n = state.total + state.escalations.size;
    const shown = state.cards.size + state.escalations.size;
    const badge = $("#pending-count");
    badge.textContent = String(n);
    badge.classList.toggle("zero", n === 0);
    document.title = n ? `(${n}) goldfive inbox` : "goldfive inbox";
    $("#inbox-empty").hidden = n !== 0;
    $("#inbox-sub").textContent = n
      ? `${n} waiting` + (shown < n ? ` — showing the ${shown} that expire first` : "") + ", soonest to expire first"
      : "";
  }

  function closeCard(runId, targetId, name, body) {
    let closed = null;
    let next = null;
    for (const [k, entry] of state.cards) {
      if (pick(entry.item, "target_id") === targetId && (!runId || pick(entry.item, "run_id") === runId)) {
        closed = entry;
        const here = entry.node.contains(document.activeElement) || entry.node.classList.contains("current");
        if (here) next = neighbour(entry.node);
        entry.node.remove();
        state.cards.delete(k);
        state.selected.delete(k);
      }
    }
    if (next) focusCard(next); // the person goes on with the next request, not from the top of the page
    updateBulk();
    const other = (i) => !(pick(i, "target_id") === targetId && (!runId || pick(i, "run_id") === runId));
    state.pending = state.pending.filter(other);
    state.orphaned = (state.orphaned || []).filter(other);
    if (!closed) return;
    if (pick(closed.item, "state") === "orphaned") state.orphanedTotal = Math.max(0, (state.orphanedTotal || 1) - 1);
    else state.total = Math.max(0, state.total - 1);
    updateCount();
    renderRunCards();
    const tool = pick(closed.item, "tool_name") || "request";
    const by = pick(body, "decided_by");
    const what = {
      approval_granted: "approved",
      approval_rejected: "rejected",
      approval_timed_out: "expired",
      approval_cancelled: "withdrawn",
    }[name];
    // Only an event says how a card closed: a card this page closed itself has already said why.
    if (!closed.mine && what) toast(`${tool} (${short(targetId)}) was ${what}${by ? " by " + by : ""} at ${clock(Date.now())}`);
  }

  function setMode(card, mode) {
    if (card.dataset.input) return; // a request for input is its form (input.js)
    const q = (s) => $(s, card);
    q(".editor").hidden = mode !== "edit";
    q(".rejecter").hidden = mode !== "reject";
    q(".args-block").hidden = mode === "edit";
    for (const b of [".act-approve", ".act-edit", ".act-reject"]) q(b).hidden = mode !== "view";
    if (card.dataset.noArgs) q(".act-edit").hidden = true;
    // Not offered at all where the governing rule lets nobody take that decision (see ruleBars).
    if (card.dataset.noApprove) for (const b of [".act-approve", ".act-edit"]) q(b).hidden = true;
    if (card.dataset.noReject) q(".act-reject").hidden = true;
    q(".act-approve-edited").hidden = mode !== "edit";
    q(".act-reset").hidden = mode !== "edit";
    q(".act-reject-confirm").hidden = mode !== "reject";
    q(".act-back").hidden = mode === "view";
    if (card.dataset.grants) q(".grant-choice").hidden = mode !== "view"; // an edited approval never grants
    // A comment goes with an approval: none where the page cannot approve.
    q(".commenter").hidden = mode === "reject" || !canDecide() || !!card.dataset.partial || !!card.dataset.noApprove;
    q(".error").textContent = "";
    if (mode === "edit") q(".args-edit").focus();
    if (mode === "reject") q(".reason").focus();
  }

  function buildCard(item) {
    const card = $("#card-template").content.firstElementChild.cloneNode(true);
    const q = (s) => $(s, card);
    const { value: args, whole, why: partWhy } = readArgs(item);
    const kind = pick(item, "kind") || "tool";
    const targetId = pick(item, "target_id") || "";
    const runId = pick(item, "run_id") || "";
    const meta = pick(item, "metadata") || {};
    card.dataset.targetId = targetId;
    card.dataset.runId = runId;
    card.dataset.requestId = clip(pick(item, "request_id") || "", 200); // the ask this card shows
    card.setAttribute("aria-label", T.plain(`${clip(pick(item, "tool_name") || "task approval", 200)} waiting`));
    show(q(".tool"), clip(pick(item, "tool_name") || (kind === "task" ? "Task approval" : "Approval"), 200));
    show(q(".agent"), clip(pick(item, "agent") || meta.agent || meta.agent_name || "—", 200));
    const link = q(".run-link");
    show(link, clip(runId, 80));
    link.href = `#/runs/${encodeURIComponent(runId)}`;
    show(q(".session"), clip(pick(item, "session_id") || "—", 80));
    const asked = ms(pick(item, "requested_at_ms"));
    q(".asked").textContent = `${clock(asked)} (${ago(asked)})`;
    q(".asked").dataset.at = String(asked);
    show(q(".target"), clip(targetId, 80));
    const prompt = pick(item, "prompt") || "";
    if (prompt) q(".prompt").append(T.longText(prompt, MAX_PROMPT, { lines: true }));
    else q(".agent-words").hidden = true;
    window.goldfiveContext.fill(q(".context"), item); // what led here (context.js)
    if (args == null || (typeof args === "object" && !Object.keys(args).length && kind === "task")) {
      q(".args-block").hidden = true;
      q(".act-edit").hidden = true;
      card.dataset.noArgs = "1";
    } else {
      T.showJson(q(".args"), args);
    }
    const original = parsedOrText(pick(item, "original_args_json")) ?? pick(item, "original_args");
    if (original != null && pick(item, "original_args_digest")) {
      q(".original").hidden = false;
      T.showJson(q(".original-args"), original);
    }
    markHidden(card, item, args, original);
    if (!whole) {
      // Approve only what the page holds whole: an approval here would say yes to arguments nobody saw.
      card.dataset.partial = "1";
      const note = q(".partial-note");
      note.hidden = false;
      show(note, `Approve is off on this card: ${partWhy}, so it cannot show you everything that would run. ` +
        `Reject it, or check the call with: goldfive show ${clip(targetId, 80)}`);
    }
    if (pick(item, "state") === "orphaned") {
      card.classList.add("orphaned");
      q(".status").textContent = "agent not running";
      const why = pick(item, "orphaned_reason") || "its agent is not running";
      card.insertBefore(
        el("p", { class: "note", text: `${clip(why, 300)}. A decision is recorded and applies if the call is replayed.` }),
        q(".agent-words"),
      );
    }
    card.dataset.expires = String(ms(pick(item, "expires_at_ms")));
    tick(card);
    showPolicy(card, item);
    offerGrants(card, item);
    ruleBars(card, item);

    const editor = q(".args-edit");
    const showDiff = () => {
      show(q(".error"), ""); // the server's word on the previous text no longer applies to this one
      const { value, problem } = readEdited(editor.value);
      editor.classList.toggle("invalid", !!problem);
      editor.removeAttribute("aria-invalid");
      q(".act-approve-edited").disabled = !!problem || !canDecide();
      warnEditor(card, editor, problem ? null : value);
      const diff = q(".diff");
      diff.textContent = "";
      if (problem) {
        diff.append(el("span", { class: "del", text: problem }));
        return;
      }
      showDiffLines(diff, diffLines(args, value));
    };
    editor.addEventListener("input", showDiff);
    const reason = q(".reason");
    const checkReason = () => (q(".act-reject-confirm").disabled = !reason.value.trim());
    reason.addEventListener("input", checkReason);

    const pickBox = q(".select");
    pickBox.disabled = !canDecide();
    pickBox.addEventListener("change", () => select(card, pickBox.checked));
    card.addEventListener("focusin", () => markCurrent(card));
    q(".act-approve").addEventListener("click", () => decide(card, "approve", {}));
    q(".act-edit").addEventListener("click", () => {
      if (!editor.dataset.touched) editor.value = editable(args);
      editor.dataset.touched = "1";
      setMode(card, "edit");
      showDiff();
    });
    q(".act-reset").addEventListener("click", () => {
      editor.value = editable(args);
      showDiff();
      editor.focus();
    });
    q(".act-escape").addEventListener("click", () => {
      editor.value = T.escapeRaw(editor.value);
      showDiff();
      editor.focus();
    });
    q(".act-approve-edited").addEventListener("click", () => {
      const { value, problem } = readEdited(editor.value);
      if (problem) return;
      decide(card, "approve", { edited_args: value });
    });
    q(".act-reject").addEventListener("click", () => {
      setMode(card, "reject");
      checkReason();
    });
    q(".act-reject-confirm").addEventListener("click", () => {
      const why = reason.value.trim();
      if (!why) {
        q(".error").textContent = "Say why: the agent's model reads the reason.";
        return;
      }
      decide(card, "reject", { reason: why });
    });
    q(".act-back").addEventListener("click", () => setMode(card, "view"));
    card.addEventListener("keydown", (e) => {
      if (e.key === "Escape" && q(".act-back").hidden === false) {
        setMode(card, "view");
        q(".act-approve").focus();
      }
      if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
        if (!q(".editor").hidden) q(".act-approve-edited").click();
        else if (!q(".rejecter").hidden) q(".act-reject-confirm").click();
      }
    });
    enableActions(card);
    setMode(card, "view");
    if (kind === "input" && window.goldfiveInput) window.goldfiveInput.fill(card, item, decide, canDecide());
    if (!canDecide()) q(".error").textContent = "You are signed in as a viewer: you can see requests but not answer them.";
    return card;
  }

  // Buttons a person may use now: none for a viewer; never Approve on a card that does not hold its whole arguments.
  function enableActions(card) {
    for (const b of card.querySelectorAll(".actions button")) b.disabled = !canDecide();
    if (card.dataset.noReject) for (const s of [".act-reject", ".act-reject-confirm"]) $(s, card).disabled = true;
    if (!card.dataset.partial && !card.dataset.noApprove) return;
    for (const s of [".act-approve", ".act-edit", ".act-approve-edited"]) $(s, card).disabled = true;
    $(".grant", card).disabled = true;
  }

  // What the governing rule lets anyone decide (policy.decisions). With serve --policy, a call the server's rule
  // denies can only be rejected, and one it could not judge cannot be decided at all: the card offers no button
  // the server would refuse (nor does Approve selected, nor the keyboard), and says why.
  function ruleBars(card, item) {
    const policy = pick(item, "policy");
    const decisions = policy && Array.isArray(policy.decisions) ? policy.decisions : null;
    if (!decisions || kindOf(item) === "input") return;
    if (!decisions.includes("approve")) card.dataset.noApprove = "1";
    if (!decisions.includes("reject")) card.dataset.noReject = "1";
    if (decisions.includes("approve")) return;
    const why = String(policy.error || "").replace(/^refused: /, "");
    const say = decisions.includes("reject")
      ? `Approve is not offered: ${why}. Reject it, with a reason the agent's model reads.`
      : `This request cannot be decided here: ${why}.`;
    const note = $(".rule-bar", card);
    note.hidden = false;
    show(note, clip(say, 800));
  }
  function kindOf(item) {
    return pick(item, "kind") || "tool";
  }

  function textsOf(value, prefix) {
    const fields = [];
    T.eachText(value, "", (where, text) => fields.push([prefix + where, text]));
    return fields;
  }

  // The card says which hidden characters the request holds and where (each is also a token where it stands).
  function markHidden(card, item, args, original) {
    const fields = [
      ["the tool name", pick(item, "tool_name") || ""],
      ["the agent's name", pick(item, "agent") || ""],
      ["the run id", pick(item, "run_id") || ""],
      ["the session id", pick(item, "session_id") || ""],
      ["the request id", pick(item, "target_id") || ""],
      ["the prompt", pick(item, "prompt") || "", true],
      ...textsOf(args, "argument "),
      ...(original == null ? [] : textsOf(original, "originally requested ")),
    ];
    const summary = T.hiddenSummary(fields);
    const mixed = T.mixedScripts(fields);
    const note = $(".hidden-note", card);
    note.hidden = !summary && !mixed;
    const says = [];
    if (summary)
      says.push("Hidden characters: this request holds characters you could not see, or that change the order " +
        `text is shown in. Each is shown as ⟨U+…⟩ where it stands: ${summary}.`);
    if (mixed) says.push(`Look-alike letters: ${mixed}.`);
    show(note, says.join(" "));
  }

  // The editor is plain text: say what hidden characters the edit holds (written as \u escapes) and any typed or
  // pasted raw, where they are, with a button that writes those as escapes too.
  function warnEditor(card, editor, value) {
    const raw = T.hiddenPositions(editor.value);
    const held = value == null ? "" : T.hiddenSummary(textsOf(value, "argument "));
    const parts = [];
    if (raw) parts.push(`Your text holds characters you cannot see: ${raw}.`);
    if (held) parts.push(`The edited arguments hold hidden characters (written as \\u escapes): ${held}.`);
    $(".edit-hidden", card).hidden = !parts.length;
    show($(".edit-hidden-text", card), parts.join(" "));
    $(".act-escape", card).hidden = !raw;
  }

  function showDiffLines(box, lines) {
    for (const line of lines) box.append(el("span", { class: line.cls }, T.longText(line.text, T.VALUE_LIMIT + 200)));
  }

  // -- policies: the rule that asked, quorum progress, grants ------------------------------------------
  function showPolicy(card, item) {
    if (window.goldfiveReview) window.goldfiveReview.show(card, item); // review.js: the reviewer's verdict
    const policy = pick(item, "policy");
    const box = $(".policy", card);
    box.hidden = !policy;
    if (!policy) return;
    const who = (policy.approvers || []).join(", ");
    const action = policy.action && policy.action !== "ask" ? ` (${policy.action})` : "";
    show($(".rule", box), clip(`rule ${policy.rule || "none"}${action}` + (who ? ` · approvers ${who}` : ""), 400));
    // With serve --policy: the server's rule governs; why (another rule than the request named, a deny, an allow).
    const note = $(".policy-note", box);
    // A refusal that takes Approve away is said beside the buttons (ruleBars), not twice.
    const barred = Array.isArray(policy.decisions) && !policy.decisions.includes("approve");
    const why = [policy.note, barred ? "" : policy.error].filter(Boolean).join(" — ");
    note.hidden = !why;
    show(note, clip(why, 600));
    // Said plainly first: the agent's own file named another rule (or other terms), and the server's applies.
    const other = $(".policy-disagrees", box);
    const named = String(policy.requested_rule || "");
    other.hidden = !(policy.disagrees && named);
    show(other, other.hidden ? "" : clip(named === policy.rule
      ? `The agent's request states other terms for rule "${clip(named, 80)}": the server's terms for it apply.`
      : `The agent named rule "${clip(named, 80)}"; the server's rule "${clip(policy.rule || "none", 80)}" applies.`, 400));
    const escalated = $(".escalated", box);
    escalated.hidden = !policy.escalated;
    // Nobody answered in time: the rule's escalation group may answer now too.
    show(escalated, policy.escalated ? clip(`escalated: ${policy.escalate_to} may answer now too`, 300) : "");
    const quorum = Number(policy.quorum || 1);
    const progress = String(pick(item, "quorum_progress") || "");
    const quorumNode = $(".quorum", box);
    quorumNode.hidden = quorum <= 1;
    // "1 of 2: ana" on the record reads "1 of 2 approvals: ana" here.
    show(quorumNode, progress ? clip(progress.replace(/^(\d+ of \d+)/, "$1 approvals"), 300) : `0 of ${quorum} approvals`);
  }

  function offerGrants(card, item) {
    const policy = pick(item, "policy");
    const offered = (policy && policy.grants) || [];
    const box = $(".grant-choice", card);
    box.hidden = !offered.length || !canDecide();
    if (!box.hidden) card.dataset.grants = "1";
    const select = $(".grant", box);
    for (const g of offered) select.append(el("option", { value: g.scope, text: T.plain(g.label) }));
    const approve = $(".act-approve", card);
    const say = () => {
      const chosen = offered.find((g) => g.scope === select.value);
      // The scope is shown before the approver confirms: what later calls this approval lets through.
      show($(".grant-scope", box), chosen
        ? `Approving also lets later ${clip(pick(item, "tool_name") || "", 80)} calls that rule ` +
          `"${clip(policy.rule, 80)}" would ask about run without asking, ${chosen.label}, until revoked.`
        : "");
      show(approve, chosen ? `Approve and allow ${clip(chosen.label, 80)}` : "Approve");
    };
    select.addEventListener("change", say);
    say();
  }

  async function refreshGrants() {
    if (!state.me) return;
    let data;
    try {
      data = await api("GET", "/api/grants");
    } catch (_) {
      return; // an older server or a passing error: nothing to show
    }
    const grants = data.grants || [];
    const list = $("#grants-list");
    list.textContent = "";
    $("#grants").hidden = grants.length === 0;
    for (const g of grants) {
      const revoke = el("button", { type: "button", class: "danger act-revoke", text: "Revoke" });
      revoke.disabled = !canDecide();
      revoke.addEventListener("click", () => revokeGrant(g, revoke));
      const expires = ms(g.expires_at_ms);
      const when = `granted by ${g.granted_by} at ${clock(ms(g.created_at_ms))}` +
        (expires ? ` · expires ${clock(expires)}` : " · until revoked or its " + (g.scope === "time" ? "time" : g.scope) + " ends");
      list.append(
        el("li", { class: "grant-item", "data-grant-id": g.grant_id },
          el("div", {}, el("div", { class: "what", text: clip(g.description, 400) }),
            el("div", { class: "when mono", text: clip(`${g.grant_id} · ${when}`, 300) })),
          revoke),
      );
    }
  }

  async function revokeGrant(grant, button) {
    button.disabled = true;
    try {
      await api("POST", `/api/grants/${encodeURIComponent(grant.grant_id)}/revoke`, {});
      toast(`Revoked ${grant.grant_id}: its calls ask a person again.`);
    } catch (err) {
      toast(`Could not revoke ${grant.grant_id}: ${err.message}`, true);
    }
    refreshGrants();
  }

  function readEdited(text) {
    const { value, problem } = T.parseExact(text);
    if (problem) return { value: null, problem: "Not valid JSON: " + problem };
    if (!value || typeof value !== "object" || Array.isArray(value))
      return { value: null, problem: "The arguments must be a JSON object ({ … })." };
    return { value, problem: "" };
  }

  function flatten(value, path, out) {
    if (value && typeof value === "object" && !T.isRaw(value)) {
      const keys = Array.isArray(value) ? value.map((_, i) => i) : Object.keys(value);
      if (!keys.length) out.set(path || "(arguments)", Array.isArray(value) ? "[]" : "{}");
      for (const k of keys) {
        const sub = Array.isArray(value) ? `${path}[${k}]` : path ? `${path}.${k}` : String(k);
        flatten(value[k], sub, out);
      }
    } else {
      out.set(path || "(arguments)", JSON.stringify(value));
    }
    return out;
  }

  function diffLines(before, after) {
    const a = flatten(before, "", new Map());
    const b = flatten(after, "", new Map());
    const lines = [];
    let changed = 0;
    for (const [path, old] of a) {
      if (!b.has(path)) {
        lines.push({ cls: "del", text: `- ${path}: ${old}` });
        changed++;
      } else if (b.get(path) !== old) {
        lines.push({ cls: "del", text: `- ${path}: ${old}` }, { cls: "add", text: `+ ${path}: ${b.get(path)}` });
        changed++;
      } else {
        lines.push({ cls: "same", text: `  ${path}: ${old}` });
      }
    }
    for (const [path, value] of b) {
      if (!a.has(path)) {
        lines.push({ cls: "add", text: `+ ${path}: ${value}` });
        changed++;
      }
    }
    if (!changed) lines.unshift({ cls: "same", text: "(no change yet: approving now is a plain approval)" });
    return lines;
  }

  // Decide one card. `bulk`: one of several selected cards (never a standing grant, no toast of its own: the
  // caller sums up). Returns {ok, counted, text}: what happened, in words.
  async function decide(card, verb, extra, bulk) {
    const entry = state.cards.get(`${card.dataset.runId}/${card.dataset.targetId}`);
    const item = entry ? entry.item : {};
    const errorBox = $(".error", card);
    const buttons = card.querySelectorAll(".actions button");
    const body = { ...extra };
    const digest = pick(item, "args_digest");
    if (digest) body.args_digest = digest;
    // The ask this card drew, not the record's latest: a re-ask since is refused, never decided unseen.
    if (card.dataset.requestId) body.request_id = card.dataset.requestId;
    if (verb === "approve" && card.dataset.partial) {
      // never: the page does not hold the whole arguments
      return { ok: false, text: "not approved: this page does not hold its whole arguments" };
    }
    if ((verb === "approve" && card.dataset.noApprove) || (verb === "reject" && card.dataset.noReject)) {
      // never: the governing rule lets nobody take this decision (the server would refuse it)
      return { ok: false, text: `not ${verb === "approve" ? "approved" : "rejected"}: the rule does not allow it` };
    }
    const grant = $(".grant", card).value;
    if (verb === "approve" && !extra.edited_args && grant && !bulk) body.grant = grant; // never with an edit
    const comment = $(".comment", card).value.trim();
    if (verb === "approve" && comment && !body.reason) body.reason = comment; // the model reads it
    const say = bulk ? () => {} : toast;
    const targetId = card.dataset.targetId;
    const runId = card.dataset.runId;
    const path =
      `/api/approvals/${encodeURIComponent(targetId)}/${verb}` + (runId ? `?run=${encodeURIComponent(runId)}` : "");
    buttons.forEach((b) => (b.disabled = true));
    show(errorBox, "");
    // This page's own decision: its event may arrive before the answer, and must not toast a second time.
    if (entry) entry.mine = true;
    let ack;
    try {
      ack = await api("POST", path, body);
    } catch (err) {
      ack = { result: "FAILURE", detail: err.message, status: err.status, body: err.body };
    }
    const ok = ack.result === "SUCCESS" || ack.result === "RECORDED";
    if (entry && !(ok && !ack.counted)) entry.mine = false; // not closed by it: a later event is news
    if (ok && ack.counted) {
      // One vote of several: the request still waits for the others; the card stays and shows the count.
      const progress = clip(String(ack.quorum_progress || "").replace(/^(\d+ of \d+)/, "$1 approvals"), 300);
      const tool = pick(item, "tool_name") || "the request";
      const text = ack.repeated
        ? `You had already approved ${tool}; the same person counts once, so nothing changed: ${progress}`
        : `Your approval of ${tool} was counted: ${progress}`;
      say(text);
      enableActions(card);
      refreshSoon();
      return { ok: true, counted: true, text };
    }
    if (ok) {
      const tool = pick(item, "tool_name") || "request";
      const answered = { approve: "Answered", decline: "Declined", cancel: "Cancelled" }[extra.answer || verb];
      const how = card.dataset.input ? answered : verb === "reject" ? "Rejected" : "Approved";
      const edits = verb === "approve" && extra.edited_args && !card.dataset.input ? " with your edits" : "";
      const recorded = ack.result === "RECORDED" || /record/i.test(pick(ack, "verdict") || "") ? ` ${ack.detail}` : "";
      const text = `${how} ${tool} (${short(targetId)})${edits}.${recorded}`;
      say(text);
      closeCard(runId, targetId, "", {});
      refreshSoon();
      return { ok: true, text };
    }
    if (ack.status === 422 && card.dataset.input) {
      // The answer does not fit the form: the server names the field; the form shows it there (input.js).
      const field = ack.body && typeof ack.body.field === "string" ? ack.body.field : "";
      show(errorBox, clip(ack.detail || "", 1000), true);
      card.dispatchEvent(new CustomEvent("goldfive:refused", { detail: { field, text: ack.detail || "" } }));
      enableActions(card);
      return { ok: false, text: ack.detail || "" };
    }
    if (ack.status === 422 && !$(".editor", card).hidden) {
      // The edit does not fit the tool's parameters: say which field, next to the editor, and stay in it.
      const field = ack.body && typeof ack.body.field === "string" ? ack.body.field : "";
      show(errorBox, (field ? `Field “${clip(field, 120)}”: ` : "") + clip(ack.detail || "", 1000), true);
      const editor = $(".args-edit", card);
      editor.classList.add("invalid");
      editor.setAttribute("aria-invalid", "true");
      enableActions(card);
      editor.focus();
      return { ok: false, text: ack.detail || "" };
    }
    // Refused: say what the record says now (who decided it and when), or why the server refused.
    const now = await lookup(targetId, runId);
    if (now && !isOpen(now)) {
      const text = `${pick(item, "tool_name") || "request"} (${short(targetId)}): ${describeDecision(now)}`;
      if (!bulk) toast(text, true);
      closeCard(runId, targetId, "", {});
      refreshSoon();
      return { ok: false, text };
    }
    show(errorBox, clip(ack.detail || "The server refused this.", 2000), true);
    enableActions(card);
    if (!$(".editor", card).hidden) {
      const { problem } = readEdited($(".args-edit", card).value);
      $(".act-approve-edited", card).disabled = !!problem;
    }
    if (!$(".rejecter", card).hidden) $(".act-reject-confirm", card).disabled = !$(".reason", card).value.trim();
    return { ok: false, text: `${pick(item, "tool_name") || "request"} (${short(targetId)}): ${ack.detail || "refused"}` };
  }

  // -- moving through the queue, selecting, deciding several --------------------------------------------
  function queueCards() {
    return [...$("#cards").children].filter((n) => n.classList.contains("card") && !n.classList.contains("filtered"));
  }
  function neighbour(node) {
    const cards = queueCards();
    const at = cards.indexOf(node);
    if (at < 0) return null;
    return cards[at + 1] || cards[at - 1] || null;
  }
  function markCurrent(card) {
    for (const other of document.querySelectorAll(".card.current")) if (other !== card) other.classList.remove("current");
    card.classList.add("current");
  }
  function focusCard(card) {
    markCurrent(card);
    card.focus({ preventScroll: true });
    card.scrollIntoView({ block: "nearest" });
  }
  function currentCard() {
    const cards = queueCards();
    return cards.find((c) => c.classList.contains("current")) || null;
  }
  function moveCurrent(step) {
    const cards = queueCards();
    if (!cards.length) return;
    const at = cards.indexOf(currentCard());
    const next = at < 0 ? cards[0] : cards[Math.min(cards.length - 1, Math.max(0, at + step))];
    focusCard(next);
  }
  function select(card, on) {
    const k = `${card.dataset.runId}/${card.dataset.targetId}`;
    if (on && canDecide()) state.selected.add(k);
    else state.selected.delete(k);
    card.classList.toggle("selected", state.selected.has(k));
    $(".select", card).checked = state.selected.has(k);
    updateBulk();
  }
  function selectedEntries() {
    return [...state.selected].map((k) => state.cards.get(k)).filter(Boolean);
  }
  // Why the selection cannot be approved (or rejected) in one action, in words; "" when it can.
  function bulkProblem(verb) {
    const entries = selectedEntries();
    const name = (e) => `${pick(e.item, "tool_name") || "request"} (${short(pick(e.item, "target_id"))})`;
    const quorum = entries.filter((e) => Number((pick(e.item, "policy") || {}).quorum || 1) > 1);
    if (quorum.length)
      return `${quorum.map(name).join(", ")} need several approvers: decide ${quorum.length === 1 ? "it" : "them"} one at a time.`;
    const partial = entries.filter((e) => e.node.dataset.partial);
    if (verb === "approve" && partial.length)
      return `${partial.map(name).join(", ")}: this page does not hold the whole arguments, so it cannot approve ` +
        `${partial.length === 1 ? "it" : "them"}.`;
    const barred = entries.filter((e) => e.node.dataset[verb === "approve" ? "noApprove" : "noReject"]);
    if (barred.length) {
      const them = barred.length === 1 ? "it" : "them";
      return verb === "approve"
        ? `${barred.map(name).join(", ")}: the server's rule does not let anyone approve ${them}; reject ${them} instead.`
        : `${barred.map(name).join(", ")}: the server's rule lets nobody decide ${them} here.`;
    }
    return "";
  }
  function updateBulk() {
    for (const k of [...state.selected]) if (!state.cards.has(k)) state.selected.delete(k);
    const n = state.selected.size;
    $("#bulk").hidden = n === 0;
    if (!n) $("#bulk-rejecter").hidden = true;
    $("#bulk-count").textContent = `${n} selected`;
    const problem = bulkProblem("approve") || "";
    const rejecting = bulkProblem("reject") || "";
    $("#bulk-approve").disabled = state.bulkBusy || !!problem || !canDecide();
    $("#bulk-reject").disabled = state.bulkBusy || !!rejecting || !canDecide();
    const why = problem || rejecting;
    $("#bulk-why").textContent = why ? T.plain(clip(why, 600)) : "";
  }
  // Each selected card is decided on its own (its own signed, audited record), the exact cards selected and
  // no others, one after another; then one toast sums up.
  async function decideSelected(verb, reason) {
    if (state.bulkBusy || bulkProblem(verb)) return;
    const entries = selectedEntries();
    state.bulkBusy = true;
    updateBulk();
    const done = [];
    const refused = [];
    try {
      for (const entry of entries) {
        const outcome = await decide(entry.node, verb, verb === "reject" ? { reason } : {}, true);
        (outcome && outcome.ok ? done : refused).push(outcome ? outcome.text : "not sent");
      }
    } finally {
      state.bulkBusy = false;
    }
    const how = verb === "reject" ? "Rejected" : "Approved";
    toast(`${how} ${done.length} of ${entries.length} selected.` + (refused.length ? ` Not decided: ${refused.join("; ")}` : ""),
      refused.length > 0);
    $("#bulk-reason").value = "";
    $("#bulk-rejecter").hidden = true;
    updateBulk();
  }
  function onKey(e) {
    const dialog = $("#keys");
    if (e.key === "?" && !typing(e.target)) {
      e.preventDefault();
      if (dialog.open) dialog.close();
      else dialog.showModal();
      return;
    }
    if (dialog.open || e.ctrlKey || e.metaKey || e.altKey || typing(e.target)) return;
    if ($("#view-inbox").hidden) return;
    const card = currentCard();
    const press = (sel) => {
      const button = card && $(sel, card);
      if (button && !button.hidden && !button.disabled) button.click();
    };
    const actions = {
      j: () => moveCurrent(1),
      ArrowDown: () => moveCurrent(1),
      k: () => moveCurrent(-1),
      ArrowUp: () => moveCurrent(-1),
      a: () => press(".act-approve"),
      r: () => press(".act-reject"),
      e: () => press(".act-edit"),
      x: () => card && select(card, !state.selected.has(`${card.dataset.runId}/${card.dataset.targetId}`)),
    };
    const act = actions[e.key];
    if (!act) return;
    e.preventDefault();
    act();
  }
  function typing(target) {
    return !!target && (["INPUT", "TEXTAREA", "SELECT"].includes(target.tagName) || target.isContentEditable);
  }

  async function lookup(targetId, runId) {
    try {
      const data = await api(
        "GET",
        `/api/approvals/${encodeURIComponent(targetId)}` + (runId ? `?run=${encodeURIComponent(runId)}` : ""),
      );
      return data.approval || data;
    } catch (_) {
      return null;
    }
  }
  function isOpen(item) {
    const status = pick(item, "status");
    return status === "pending" || status === "timed_out" || status === "orphaned";
  }
  function describeDecision(item) {
    const decision = pick(item, "decision");
    const by = pick(item, "decided_by");
    const at = ms(pick(item, "decided_at_ms"));
    if (decision === "approve" || decision === "reject") {
      return `already ${decision === "approve" ? "approved" : "rejected"}${by ? " by " + by : ""}` +
        (at ? ` at ${clock(at)}` : "") + "; nothing was changed";
    }
    const status = pick(item, "status") || "closed";
    const detail = pick(item, "detail");
    return `already ${status}${detail ? " (" + detail + ")" : ""}; nothing was changed`;
  }

  function tick(card) {
    const exp = Number(card.dataset.expires || 0);
    const box = $(".countdown", card);
    if (!exp) {
      box.textContent = "no expiry";
      return;
    }
    const rest = exp - Date.now();
    card.classList.toggle("soon", rest < 60000);
    box.textContent = rest > 0 ? `expires in ${left(rest)}` : "deadline passed";
    const asked = $(".asked", card);
    if (asked && asked.dataset.at) asked.textContent = `${clock(Number(asked.dataset.at))} (${ago(Number(asked.dataset.at))})`;
  }

  // -- runs ------------------------------------------------------------------------------------------
  async function refreshRuns() {
    let data;
    try {
      data = await api("GET", "/api/runs");
    } catch (err) {
      return;
    }
    const runs = data.runs || [];
    const body = $("#runs-table tbody");
    body.textContent = "";
    $("#runs-empty").hidden = runs.length > 0;
    $("#runs-table").hidden = runs.length === 0;
    for (const run of runs) {
      const id = pick(run, "run_id");
      const st = runStateOf(run, []);
      body.append(
        el(
          "tr",
          {},
          el("td", { "data-label": "Run" },
            el("a", { class: "mono", href: `#/runs/${encodeURIComponent(id)}`, text: clip(id, 80) })),
          el("td", { "data-label": "State" },
            el("span", { class: "badge " + st.cls, text: st.label, title: clip(st.why || "", 300) })),
          el("td", { "data-label": "Agent", text: clip(pick(run, "agent") || pick(run, "adapter") || "—", 80) }),
          el("td", { "data-label": "Started", text: clock(ms(pick(run, "started_at_ms"))) }),
          el("td", { "data-label": "Process", text: clip(`${pick(run, "pid") || "?"} on ${pick(run, "host") || "?"}`, 120) }),
        ),
      );
    }
  }

  function runStateOf(run, events) {
    const live = pick(run, "liveness");
    const status = pick(run, "state") || pick(run, "status") || "";
    if (status === "finished" || status === "completed" || live === "finished")
      return { label: "FINISHED", cls: "finished" };
    if (status === "cancelled" || status === "aborted" || status === "terminated")
      return { label: status.toUpperCase(), cls: "cancelled" };
    if (live && live !== "live") return { label: "NOT RUNNING", cls: "gone", why: live };
    const pause = pauseOf(events);
    if (pause !== undefined) {
      // The run says itself whether it waits (run_paused / run_resumed): no guessing from drifts.
      if (!pause) return { label: "RUNNING", cls: "running" };
      if (pause.escalated) return { label: `ESCALATED · ${pause.name}`, cls: "escalated", drift: pause };
      return { label: "PAUSED", cls: "paused", why: pause.why };
    }
    const standing = pick(run, "paused");
    if (standing && !events.length) {
      // The runs list has no events: the server read the run's standing pause from its log.
      const by = String(pick(standing, "by") || "");
      const via = String(pick(standing, "channel") || "");
      if (pick(standing, "escalated"))
        return { label: `ESCALATED · ${clip(String(pick(standing, "drift_kind") || "a drift").replace(/_/g, " "), 60)}`, cls: "escalated" };
      const why = (by ? `by ${by}${via ? " (" + via + ")" : ""}: ` : "") + String(pick(standing, "reason") || "");
      return { label: "PAUSED", cls: "paused", why };
    }
    const esc = escalationOf(pick(run, "run_id"), events);
    if (esc) return { label: `ESCALATED · ${esc.name}`, cls: "escalated", drift: esc };
    if (status === "paused") return { label: "PAUSED", cls: "paused", why: pick(run, "pause_reason") || "" };
    return { label: "RUNNING", cls: "running" };
  }

  function pauseOf(events) {
    // undefined: the run never reported a pause (an older agent); null: not paused now; else the pause.
    let pause;
    for (const ev of events) {
      const [name, body] = payloadOf(ev);
      if (name === "run_paused") {
        const kind = String(pick(body, "drift_kind") || "");
        const by = String(pick(body, "paused_by") || "");
        const via = String(pick(body, "channel") || "");
        pause = {
          at: ms(pick(ev, "emitted_at")),
          escalated: !!pick(body, "escalated"),
          kind,
          name: clip((kind || "a drift").replace(/_/g, " "), 60),
          detail: String(pick(body, "reason") || ""),
          deadline: ms(pick(body, "deadline_at")),
          why: (by ? `by ${by}${via ? " (" + via + ")" : ""}: ` : "") + String(pick(body, "reason") || ""),
        };
      } else if (name === "run_resumed" || name === "run_completed" || name === "run_aborted") {
        if (pause !== undefined) pause = null;
      }
    }
    return pause;
  }

  function escalationOf(runId, events) {
    // The newest escalation drift (ladder level 4, or a critical HUMAN_INTERVENTION_REQUIRED) that this run has
    // not visibly moved past: no end of run after it, and no resume/steer/cancel sent from this page after it.
    let esc = null;
    for (const ev of events) {
      const [name, body] = payloadOf(ev);
      const t = ms(pick(ev, "emitted_at"));
      if (name === "drift_detected") {
        const level = Number(pick(body, "ladder_level") || 0);
        const kind = pick(body, "kind");
        if (level >= 4 || kind === "HUMAN_INTERVENTION_REQUIRED") {
          if (!esc || kind === "HUMAN_INTERVENTION_REQUIRED" || esc.kind !== "HUMAN_INTERVENTION_REQUIRED" || t > esc.at)
            esc = { at: t, kind: String(kind || ""), detail: String(pick(body, "detail") || "") };
        }
      }
      if (name === "run_completed" || name === "run_aborted") esc = null;
      if (esc && (name === "approval_requested" || name === "task_completed") && t > esc.at) esc = null;
    }
    if (esc) {
      // The HUMAN_INTERVENTION_REQUIRED drift says what it escalated from ("escalated from LOOPING_TOOL_CALL: …").
      const from = /escalated from ([A-Z_]+)/.exec(esc.detail);
      esc.name = clip((from ? from[1] : esc.kind).replace(/_/g, " "), 60);
    }
    const local = state.runLocal.get(runId);
    if (esc && local && local.afterMs >= esc.at) return null;
    return esc;
  }

  let runTimer = 0;
  function refreshRunSoon() {
    clearTimeout(runTimer);
    runTimer = setTimeout(refreshRun, 120);
  }

  async function refreshRun() {
    const runId = state.runId;
    if (!runId) return;
    const gen = ++state.runGen;
    let run = { run_id: runId };
    const list = [];
    try {
      // Page through the run's events (bounded: the newest 20,000 is plenty for a timeline).
      let after = 0;
      for (let pageNo = 0; pageNo < 20; pageNo++) {
        const data = await api("GET", `/api/runs/${encodeURIComponent(runId)}/events?after=${after}&limit=1000`);
        if (data.run) run = data.run;
        const got = data.events || [];
        list.push(...got.map(unwrap));
        if (got.length < 1000 || data.next_after == null || data.next_after === after) break;
        after = data.next_after;
      }
    } catch (err) {
      show($("#run-sub"), err.message);
      return;
    }
    if (gen !== state.runGen || runId !== state.runId) return;
    const st = runStateOf(run, list);
    show($("#run-id"), clip(runId, 80));
    const badge = $("#run-badge");
    show(badge, st.label);
    badge.className = "badge " + st.cls;
    const started = ms(pick(run, "started_at_ms")) || (list[0] ? ms(pick(list[0], "emitted_at")) : 0);
    show($("#run-sub"), clip(
      `${pick(run, "agent") || pick(run, "adapter") || "agent"} · session ${pick(run, "session_id") || "—"} · ` +
      `started ${clock(started)} · process ${pick(run, "pid") || "?"} on ${pick(run, "host") || "?"}`, 600));
    const drift = $("#run-drift");
    drift.textContent = "";
    if (st.drift) {
      drift.append(
        el("strong", { text: `Escalated to you: ${st.drift.name.toLowerCase()}` }),
        el("div", {}, T.longText(st.drift.detail, 2000, { lines: true })),
        el("div", {
          class: "sub",
          text:
            `at ${clock(st.drift.at)} — the run waits for you: Resume, Steer or Cancel.` +
            (st.drift.deadline ? ` Unanswered, it is aborted at ${clock(st.drift.deadline)}.` : ""),
        }),
      );
    } else if (st.why) {
      drift.append(el("strong", { text: st.label + ": " }), T.visible(clip(st.why, 2000), true));
    }
    drift.hidden = !st.drift && !st.why;
    const over = st.cls === "finished" || st.cls === "cancelled" || st.cls === "gone";
    for (const b of $("#run-actions").querySelectorAll("button, input")) b.disabled = over || !canDecide();
    const waiting = st.cls === "escalated" || st.cls === "paused";
    $("#run-resume").classList.toggle("primary", waiting);
    $("#run-resume").hidden = !waiting;
    $("#run-pause").hidden = waiting;
    renderTimeline(list, !over);
    renderEvents(list);
    renderRunCards();
  }

  function renderRunCards() {
    const box = $("#run-cards");
    if (!state.runId || $("#view-run").hidden) return;
    // The run view shows the same live cards as the inbox (moved, not copied, while it is open).
    const mine = [...state.cards.values()].filter((e) => pick(e.item, "run_id") === state.runId);
    for (const e of mine) if (e.node.parentNode !== box) box.append(e.node);
    for (const node of [...box.children]) if (!mine.some((e) => e.node === node)) box.removeChild(node);
    $("#run-cards-empty").hidden = mine.length > 0;
  }

  function renderTimeline(events, running) {
    const tasks = new Map();
    const targetTask = new Map();
    let pausedTask = null;
    let t0 = 0;
    let t1 = 0;
    const task = (id, t) => {
      if (!tasks.has(id)) tasks.set(id, { id, title: "", segs: [], open: null, end: "", started: t });
      return tasks.get(id);
    };
    const switchTo = (tk, kind, t) => {
      if (tk.open && tk.open.kind === kind) return;
      if (tk.open) tk.open.end = t;
      tk.open = kind ? { kind, start: t, end: 0 } : null;
      if (tk.open) tk.segs.push(tk.open);
    };
    for (const ev of events) {
      const [name, body] = payloadOf(ev);
      const t = ms(pick(ev, "emitted_at"));
      if (!t) continue;
      t0 = t0 ? Math.min(t0, t) : t;
      t1 = Math.max(t1, t);
      const id = pick(body, "task_id");
      if (name === "task_started") {
        const tk = task(id, t);
        tk.title = pick(body, "title") || "";
        switchTo(tk, "running", t);
      } else if (name === "task_blocked" && id) {
        switchTo(task(id, t), "blocked", t);
      } else if (name === "task_progress" && id) {
        switchTo(task(id, t), "running", t);
      } else if (name === "approval_requested") {
        const target = pick(body, "target_id") || "";
        const tid = id || (tasks.size ? [...tasks.keys()][0] : "");
        if (tid) {
          targetTask.set(target, tid);
          switchTo(task(tid, t), "blocked", t);
        }
        // Each request gets its own row: waiting for a person, then approved (done) or not (failed).
        const row = task(`approval:${target}`, t);
        row.title = `↳ ${(pick(body, "metadata") || {}).tool_name || "approval"}`;
        switchTo(row, "blocked", t);
      } else if (name.startsWith("approval_")) {
        const target = pick(body, "target_id") || "";
        const tid = targetTask.get(target);
        if (tid && name !== "approval_timed_out") switchTo(task(tid, t), "running", t);
        const row = tasks.get(`approval:${target}`);
        if (row && (name !== "approval_timed_out" || !pick(body, "still_open"))) {
          switchTo(row, "", t);
          row.end = name === "approval_granted" ? "done" : "failed";
          row.segs.push({ kind: row.end, start: t, end: t });
          row.verdict = { approval_granted: "approved", approval_rejected: "rejected" }[name] || "no answer";
        }
      } else if (name === "drift_detected" && Number(pick(body, "ladder_level") || 0) >= 4) {
        const tid = id && tasks.has(id) ? id : [...tasks.values()].reverse().find((x) => x.open)?.id;
        if (tid) switchTo(task(tid, t), "blocked", t);
      } else if (name === "run_paused") {
        pausedTask = [...tasks.values()].reverse().find((x) => x.open && !x.id.startsWith("approval:"));
        if (pausedTask) switchTo(pausedTask, "blocked", t);
      } else if (name === "run_resumed") {
        if (pausedTask && pausedTask.open) switchTo(pausedTask, "running", t);
        pausedTask = null;
      } else if (name === "task_completed" || name === "task_failed" || name === "task_cancelled") {
        if (id) {
          const tk = task(id, t);
          switchTo(tk, "", t);
          tk.end = name === "task_completed" ? "done" : "failed";
        }
      } else if (name === "run_completed" || name === "run_aborted") {
        for (const tk of tasks.values()) if (tk.open) switchTo(tk, "", t);
      }
    }
    const now = running ? Date.now() : t1;
    t1 = Math.max(t1, now);
    const span = Math.max(1, t1 - t0);
    $("#tl-start").textContent = t0 ? clock(t0) : "";
    $("#tl-end").textContent = t0 ? (running ? "now" : clock(t1)) : "";
    const box = $("#timeline");
    box.textContent = "";
    if (!tasks.size) box.append(el("p", { class: "sub", text: "No tasks recorded for this run yet." }));
    for (const tk of tasks.values()) {
      const track = el("div", { class: "tl-track" });
      for (const seg of tk.segs) {
        const end = seg.end || now;
        let cls = seg.kind;
        if (cls === "running" && tk.end) cls = tk.end;
        const w = Math.min(100, Math.max(0.8, ((end - seg.start) / span) * 100));
        const l = Math.min(((seg.start - t0) / span) * 100, 100 - w); // a marker at the very end stays visible
        const bar = el("span", {
          class: "seg " + cls,
          title: `${seg.kind === "blocked" ? "blocked" : tk.end || "working"}: ${clock(seg.start)} – ${seg.end ? clock(seg.end) : "now"}`,
        });
        bar.style.left = `${l.toFixed(2)}%`;
        bar.style.width = `${w.toFixed(2)}%`;
        track.append(bar);
      }
      const status = tk.verdict || (tk.open ? (tk.open.kind === "blocked" ? "blocked" : "working") : tk.end || "ended");
      const label = clip(tk.title || tk.id, 160);
      box.append(
        el(
          "div",
          { class: "tl-row", role: "listitem", "data-task-id": tk.id, "data-status": status },
          el("div", { class: "tl-name", title: `${label} (${status})`, text: `${label} · ${status}` }),
          track,
        ),
      );
    }
  }

  function describeEvent(name, body) {
    const p = (n) => pick(body, n) || "";
    switch (name) {
      case "run_started": return `run started (${p("adapter")})`;
      case "task_started": return `task ${p("task_id")} started: ${p("title")}`;
      case "task_progress": return `task ${p("task_id")}: ${p("message")}`;
      case "task_completed": return `task ${p("task_id")} done`;
      case "task_failed": return `task ${p("task_id")} failed: ${p("reason")}`;
      case "task_blocked": return `task ${p("task_id")} blocked (${p("blocker")}): ${p("needed")}`;
      case "task_cancelled": return `task ${p("task_id")} cancelled: ${p("reason")}`;
      case "drift_detected": return `drift ${p("kind")} (${p("severity")}, level ${p("ladder_level") || 0}): ${p("detail")}`;
      case "run_completed": return `run completed (${String(p("status")).replace("RUN_STATUS_", "").toLowerCase()}) ${p("summary")}`;
      case "run_aborted": return `run aborted: ${p("reason")}`;
      case "approval_requested": return `asks approval for ${(pick(body, "metadata") || {}).tool_name || p("kind")} (${p("target_id")})`;
      case "approval_granted": return `approved ${p("target_id")}${p("decided_by") ? " by " + p("decided_by") : ""}${p("edited_args_json") ? " with edits " + p("edited_args_json") : ""}`;
      case "approval_rejected": return `rejected ${p("target_id")}${p("decided_by") ? " by " + p("decided_by") : ""}: ${p("detail")}`;
      case "approval_timed_out": return `approval ${p("target_id")} timed out`;
      case "approval_cancelled": return `approval ${p("target_id")} withdrawn: ${p("reason")}`;
      case "run_paused": return pick(body, "escalated")
        ? `run paused for a person: escalated ${p("drift_kind")}: ${p("reason")}`
        : `run paused${p("paused_by") ? " by " + p("paused_by") : ""}: ${p("reason")}`;
      case "run_resumed": return `run resumed${p("how") === "steer" ? " with a steer" : ""}${p("resumed_by") ? " by " + p("resumed_by") : ""}`;
      case "decision_refused": return `decision on ${p("target_id")} refused: ${p("reason")}`;
      case "policy_applied": return `policy ${p("rule")}: ${p("action")} ${p("tool_name")}`;
      case "reviewer_verdict": return `${p("decided_by")} (${p("mode")}) said ${p("verdict")} on ${p("tool_name")}: ${p("outcome")}${p("error") ? " — " + p("error") : ""}`;
      case "approval_escalated": return `approval ${p("target_id")} escalated to ${p("to")}`;
      case "run_step": return `step ${p("kind").replace(/_/g, " ")}${p("name") ? " " + p("name") : ""}: ${p("text")}`;
      case "remote_approval_waiting": {
        const state = String(p("state")).replace("TASK_STATE_", "").toLowerCase().replace(/_/g, "-");
        const what = state === "auth-required" ? "waits for a person" : state || "changed";
        return `remote agent ${p("remote_agent")} ${what}: approval ${p("approval_id") || p("request_id")}` +
          `${p("tool") ? " for " + p("tool") : ""}${p("rule") ? " (rule " + p("rule") + ")" : ""}` +
          ` in task ${p("task_id")}${p("text") ? " — " + p("text") : ""}`;
      }
      case "execution_recorded": {
        const what = { executing: "started", done: "finished", resolved_ran: "settled: it ran", resolved_not_run: "settled: it did not run", released_not_run: "released, not run" };
        return `tool call ${p("target_id")} ${what[p("state")] || p("state")}${p("resolved_by") ? " by " + p("resolved_by") : ""}`;
      }
      default: return name || "event";
    }
  }

  // The remote agent's inbox, as its task's status named it: a link only when it is a plain http(s) address (the
  // remote agent wrote it), never followed with this page as its opener.
  function remoteLink(url) {
    const text = String(url || "");
    if (!/^https?:\/\/[^\s]+$/i.test(text) || text.length > 2000) return null;
    return el("a", { href: text, target: "_blank", rel: "noopener noreferrer", class: "remote-approval", text: " open the remote approval" });
  }

  function renderEvents(events) {
    const box = $("#run-events");
    box.textContent = "";
    for (const ev of events.slice(-200).reverse()) {
      const [name, body] = payloadOf(ev);
      box.append(
        el(
          "li",
          {},
          el("span", { class: "when", text: clock(ms(pick(ev, "emitted_at"))) }),
          el("span", { class: "what", text: clip(describeEvent(name, body), 600) }),
          name === "remote_approval_waiting" ? remoteLink(pick(body, "inbox_url")) : null,
        ),
      );
    }
  }

  async function runControl(verb, body) {
    const runId = state.runId;
    const result = $("#run-result");
    result.textContent = "sending…";
    let ack;
    try {
      ack = await api("POST", `/api/runs/${encodeURIComponent(runId)}/${verb}`, body || {});
    } catch (err) {
      ack = { result: "FAILURE", detail: err.message };
    }
    const ok = ack.result === "SUCCESS";
    show(result, `${verb}: ${ok ? "done" : "refused"} — ${clip(ack.detail || "", 2000)}`);
    if (ok) {
      state.runLocal.set(runId, { state: verb, afterMs: Date.now() });
      if (verb === "steer") $("#steer-text").value = "";
    }
    refreshRun();
  }

  // -- history ---------------------------------------------------------------------------------------
  const HISTORY_PAGE = 50;
  // The search as query parameters (dates are local days: "to" includes its whole day).
  function historyQuery() {
    const q = new URLSearchParams();
    q.set("status", $("#h-status").value);
    for (const [id, key] of [["#h-tool", "tool"], ["#h-agent", "agent"], ["#h-decider", "decider"]]) {
      const v = $(id).value.trim();
      if (v) q.set(key, v);
    }
    const since = $("#h-since").value;
    const until = $("#h-until").value;
    if (since) q.set("since", String(new Date(`${since}T00:00:00`).getTime()));
    if (until) q.set("until", String(new Date(`${until}T00:00:00`).getTime() + 86400000));
    return q;
  }
  function dateTime(t) {
    if (!t) return "—";
    const d = new Date(t);
    return `${d.toLocaleDateString(undefined, { year: "numeric", month: "short", day: "numeric" })} ${clock(t)}`;
  }
  async function refreshHistory() {
    const q = historyQuery();
    for (const [id, form] of [["#h-jsonl", "jsonl"], ["#h-csv", "csv"]]) {
      const e = new URLSearchParams(q);
      e.set("format", form);
      $(id).href = `/api/history?${e}`;
    }
    q.set("limit", String(HISTORY_PAGE));
    q.set("offset", String(state.historyOffset));
    let data;
    try {
      data = await api("GET", `/api/history?${q}`);
    } catch (err) {
      show($("#history-count"), err.message);
      return;
    }
    const items = data.approvals || [];
    const total = Number(data.total || 0);
    const first = items.length ? state.historyOffset + 1 : 0;
    $("#history-count").textContent = total
      ? `${first}–${state.historyOffset + items.length} of ${total}, newest first`
      : "";
    $("#h-newer").disabled = state.historyOffset === 0;
    $("#h-older").disabled = state.historyOffset + items.length >= total;
    const box = $("#history");
    box.textContent = "";
    $("#history-empty").hidden = items.length > 0;
    for (const item of items) {
      const decision = pick(item, "decision") || pick(item, "status") || "";
      const verdict = decision === "approve" ? "approved" : decision === "reject" ? "rejected" : decision;
      // A decision not applied: what was claimed (unverified), by whom, and the refusal's words as the reason.
      const claimed = pick(item, "status") === "refused" ? ` ${clip(pick(item, "claimed") || "decision", 20)}` : "";
      const closedAt = ms(pick(item, "decided_at_ms")) || ms(pick(item, "requested_at_ms"));
      const args = readArgs(item).value;
      const edited = parsedOrText(pick(item, "edited_args_json")) ?? pick(item, "edited_args");
      const li = el(
        "li",
        { "data-target-id": pick(item, "target_id") || "" },
        el(
          "div",
          { class: "line" },
          el("span", { class: "verdict " + (decision === "approve" || decision === "reject" ? decision : "other"), text: verdict + claimed }),
          el("strong", { class: "mono", text: clip(pick(item, "tool_name") || "task approval", 200) }),
          el("span", { text: `${claimed ? "claimed by" : "by"} ${clip(pick(item, "decided_by") || "—", 120)}` }),
          el("span", { class: "sub when", text: dateTime(closedAt) }),
          el("a", { class: "mono", href: `#/runs/${encodeURIComponent(pick(item, "run_id") || "")}`, text: clip(pick(item, "run_id"), 60) }),
        ),
      );
      if (pick(item, "detail"))
        li.append(el("p", { class: "reason" }, claimed ? "Not applied: " : "Reason: ", T.longText(pick(item, "detail"), 2000, { lines: true })));
      if (edited && typeof edited === "object") {
        const diff = el("pre", { class: "diff mono" });
        showDiffLines(diff, diffLines(args, edited));
        li.append(el("div", { class: "label", text: "Edited arguments" }), diff);
      } else if (args != null) {
        const pre = el("pre", { class: "args mono" });
        T.showJson(pre, args);
        li.append(pre);
      }
      box.append(li);
    }
  }

  // -- routing ----------------------------------------------------------------------------------------
  function route() {
    if (!state.me) return;
    const hash = location.hash || "#/";
    let view = "inbox";
    state.runId = "";
    state.focus = "";
    if (hash.startsWith("#/approvals/")) {
      // A notification's link: the inbox, with that request's card brought into view.
      state.focus = decodeURIComponent(hash.slice("#/approvals/".length).split("?")[0]);
    } else if (hash.startsWith("#/runs/")) {
      view = "run";
      state.runId = decodeURIComponent(hash.slice("#/runs/".length));
    } else if (hash.startsWith("#/runs")) view = "runs";
    else if (hash.startsWith("#/history")) view = "history";
    for (const v of document.querySelectorAll(".view")) v.hidden = v.id !== `view-${view}`;
    for (const a of document.querySelectorAll(".views a")) {
      const current = a.dataset.view === view || (view === "run" && a.dataset.view === "runs");
      if (current) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    // Cards live in the inbox list unless the run view borrows its run's cards.
    for (const node of [...$("#run-cards").children])
      (node.classList.contains("orphaned") ? $("#orphaned-cards") : $("#cards")).append(node);
    if (view === "run") {
      $("#run-result").textContent = "";
      $("#run-badge").textContent = "";
      refreshRun();
    } else renderQueue();
    if (view === "runs") refreshRuns();
    if (view === "history") refreshHistory();
  }

  function focusLinkedCard() {
    if (!state.focus) return;
    for (const entry of state.cards.values()) {
      if (entry.node.dataset.targetId !== state.focus) continue;
      state.focus = "";
      entry.node.classList.add("focused");
      entry.node.scrollIntoView({ block: "center" });
      const button = entry.node.querySelector("button");
      if (button) button.focus({ preventScroll: true });
      return;
    }
  }

  async function refreshNotifications() {
    let status;
    try {
      status = await api("GET", "/api/notifications");
    } catch (_) {
      return; // an older server or a passing error: nothing to show
    }
    const failures = (status && status.failures) || [];
    const box = $("#notify-failed");
    box.hidden = failures.length === 0;
    if (!failures.length) return;
    const first = failures[0];
    show(box,
      `${failures.length} notification${failures.length === 1 ? "" : "s"} could not be sent — ` +
      `${clip(first.channel, 60)}: ${clip(first.error, 200)}. People may not know these requests wait; ` +
      "see goldfive notify status.");
  }

  async function start() {
    $(".views").hidden = false;
    $(".who").hidden = false;
    show($("#user-name"), clip(`${state.me.name} (${state.me.role})`, 120));
    for (const entry of state.cards.values()) entry.node.remove();
    state.cards.clear();
    for (const entry of state.escalations.values()) entry.node.remove();
    state.escalations.clear();
    startEvents();
    route();
    await refreshPending();
    refreshNotifications();
    refreshGrants();
  }

  async function boot() {
    $("#login-form").addEventListener("submit", login);
    $("#logout").addEventListener("click", logout);
    $("#run-resume").addEventListener("click", () => runControl("resume"));
    $("#run-pause").addEventListener("click", () => runControl("pause", { reason: "paused from the inbox" }));
    $("#run-cancel").addEventListener("click", () => {
      if (confirm("Cancel this run? The agent stops at its next step.")) runControl("cancel", { reason: "cancelled from the inbox" });
    });
    $("#steer-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const text = $("#steer-text").value.trim();
      if (text) runControl("steer", { text });
    });
    window.addEventListener("hashchange", route);
    document.addEventListener("keydown", onKey);
    $("#keys-close").addEventListener("click", () => $("#keys").close());
    $("#bulk-approve").addEventListener("click", () => decideSelected("approve"));
    $("#bulk-reject").addEventListener("click", () => {
      $("#bulk-rejecter").hidden = false;
      $("#bulk-reason").focus();
    });
    $("#bulk-reason").addEventListener("input", () => {
      $("#bulk-reject-confirm").disabled = !$("#bulk-reason").value.trim();
    });
    $("#bulk-reject-confirm").addEventListener("click", () => {
      const why = $("#bulk-reason").value.trim();
      if (why) decideSelected("reject", why);
    });
    $("#bulk-clear").addEventListener("click", () => {
      for (const entry of selectedEntries()) select(entry.node, false);
    });
    $("#filter").addEventListener("input", applyFilter);
    $("#kind-filter").addEventListener("change", applyFilter);
    $("#history-search").addEventListener("submit", (e) => {
      e.preventDefault();
      state.historyOffset = 0;
      refreshHistory();
    });
    $("#h-newer").addEventListener("click", () => {
      state.historyOffset = Math.max(0, state.historyOffset - HISTORY_PAGE);
      refreshHistory();
    });
    $("#h-older").addEventListener("click", () => {
      state.historyOffset += HISTORY_PAGE;
      refreshHistory();
    });
    setInterval(() => {
      for (const entry of state.cards.values()) tick(entry.node);
      for (const entry of state.escalations.values()) tick(entry.node);
    }, 1000);
    setInterval(() => {
      if (state.me) refreshPending(); // a backstop; the stream does the real work
      if (state.me) refreshNotifications();
    }, 30000);
    try {
      rememberSession(await api("GET", "/api/me"));
    } catch (err) {
      if (err.status !== 401) showLogin(err.message);
      return;
    }
    await start();
  }

  document.addEventListener("DOMContentLoaded", boot);
})();
