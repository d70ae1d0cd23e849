// goldfive inbox: the context on a card (what the person asked, who, the last steps, why, the whole run).
// Everything shown is text from a person, an agent or a model: set as text only, hidden characters made
// visible by text.js, each value bounded (the server clips it too).
"use strict";

window.goldfiveContext = (function () {
  const T = window.goldfiveText;
  const KIND = { model_text: "said", tool_call: "called", tool_result: "result" };

  function node(tag, cls, ...children) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    for (const c of children) n.append(typeof c === "string" ? document.createTextNode(c) : c);
    return n;
  }
  function text(value, limit) {
    return T.longText(String(value == null ? "" : value), limit);
  }

  // Fill `box` (the card's .context) from `item.context`; a record without one says so.
  function fill(box, item) {
    box.textContent = "";
    const ctx = item && typeof item.context === "object" && item.context ? item.context : null;
    box.append(
      node("div", "label", "Context ", node("span", "unverified", "(from the run's record: words of the person, the agent and its model, unverified)")),
    );
    if (!ctx) {
      box.append(node("p", "ctx-note", "no context from this server"));
      return;
    }
    if (ctx.input) box.append(node("p", "ctx-asked", node("span", "ctx-key", "Asked "), text(ctx.input, 400)));
    const who = [];
    if (ctx.agent) who.push(`agent ${T.plain(String(ctx.agent)).slice(0, 200)}`);
    if (ctx.started_by) who.push(`started by ${T.plain(String(ctx.started_by)).slice(0, 200)}`);
    if (ctx.on_behalf_of) who.push(`for ${T.plain(String(ctx.on_behalf_of)).slice(0, 200)}`);
    if (ctx.adapter) who.push(`on ${T.plain(String(ctx.adapter)).slice(0, 40)}`);
    if (who.length) box.append(node("p", "ctx-who", node("span", "ctx-key", "Who "), who.join(" · ")));
    if (ctx.why) box.append(node("p", "ctx-why", node("span", "ctx-key", "Why "), text(ctx.why, 400)));
    const steps = Array.isArray(ctx.steps) ? ctx.steps.slice(-10) : [];
    if (steps.length) {
      const list = node("ol", "ctx-steps");
      list.setAttribute("aria-label", "The last steps before this request");
      for (const step of steps) {
        const kind = KIND[step && step.kind] || "step";
        const li = node("li", `ctx-step ${kind}`, node("span", "ctx-kind", kind));
        if (step.name) li.append(" ", node("strong", "mono", T.plain(String(step.name)).slice(0, 200)));
        li.append(" ", node("span", "ctx-text mono", text(step.text, 300)));
        list.append(li);
      }
      box.append(node("div", "ctx-key", "Last steps before this request"), list);
    }
    if (ctx.note) box.append(node("p", "ctx-note", T.plain(String(ctx.note)).slice(0, 200)));
    const runId = String(item.run_id || "");
    if (runId) {
      const link = node("a", "ctx-run", "Open the whole run");
      link.href = `#/runs/${encodeURIComponent(runId)}`;
      box.append(node("p", "", link));
    }
  }

  return { fill };
})();
