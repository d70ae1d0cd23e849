// A request for input (kind "input"): the card shows a form built from the request's schema, and the person
// submits it (an approval whose content the server checks against the schema), declines or cancels it.
// The schema, its titles and descriptions and the message come from a model or a remote MCP server: they are
// shown as text nodes only (visible tokens for hidden characters) and clipped; names never become markup.
"use strict";

window.goldfiveInput = (function () {
  const T = window.goldfiveText;
  const MAX_FIELDS = 50;
  const EMAIL = /^[^@\s]{1,64}@[^@\s]{1,255}\.[^@\s.]{1,63}$/;

  function node(tag, cls, text) {
    const n = document.createElement(tag);
    if (cls) n.className = cls;
    if (text != null) n.append(T.visible(clip(text, 300)));
    return n;
  }
  function clip(text, n) {
    text = String(text == null ? "" : text);
    return text.length > n ? T.cut(text, n) + " …" : text;
  }
  function choices(prop) {
    if (Array.isArray(prop.enum)) return prop.enum.map((v) => ({ value: String(v), title: String(v) }));
    const options = prop.oneOf || prop.anyOf;
    if (Array.isArray(options))
      return options.map((o) => ({ value: String(o && o.const), title: String((o && (o.title || o.const)) || "") }));
    return null;
  }

  // One field's control: a checkbox, a select, a group of checkboxes (multi-select) or an input.
  function control(name, prop) {
    const kind = prop.type;
    let input;
    if (kind === "boolean") {
      input = document.createElement("input");
      input.type = "checkbox";
      input.checked = prop.default === true;
    } else if (kind === "array") {
      input = document.createElement("fieldset");
      input.className = "multi";
      for (const c of choices(prop.items || {}) || []) {
        const box = document.createElement("input");
        box.type = "checkbox";
        box.value = c.value;
        const label = node("label", "", null);
        label.append(box, " ", T.visible(clip(c.title, 120)));
        input.append(label);
      }
    } else if (choices(prop)) {
      input = document.createElement("select");
      const blank = document.createElement("option");
      blank.value = "";
      blank.textContent = "— choose —";
      input.append(blank);
      for (const c of choices(prop)) {
        const option = document.createElement("option");
        option.value = c.value;
        option.textContent = T.plain(clip(c.title, 120));
        input.append(option);
      }
      if (typeof prop.default === "string") input.value = prop.default;
    } else {
      input = document.createElement("input");
      input.type = kind === "number" || kind === "integer" ? "number" : prop.format === "email" ? "email" : "text";
      if (kind === "integer") input.step = "1";
      if (kind === "number") input.step = "any";
      if (prop.format === "date") input.type = "date";
      if (prop.default != null && typeof prop.default !== "object") input.value = String(prop.default);
      input.autocomplete = "off";
    }
    input.name = name;
    input.classList.add("input-field");
    return input;
  }

  // The value a control holds, as the schema types it; `undefined` when the person left it empty.
  function read(input, prop) {
    if (prop.type === "boolean") return input.checked;
    if (prop.type === "array") return [...input.querySelectorAll("input:checked")].map((b) => b.value);
    const text = input.value;
    if (text === "") return undefined;
    if (prop.type === "integer" || prop.type === "number") return Number(text);
    return text;
  }

  // Why `value` does not fit `prop` ("" = it does): the same rules the server applies (it checks again).
  function problem(prop, value, required) {
    if (value === undefined) return required ? "is required" : "";
    const kind = prop.type;
    if (kind === "integer" && !Number.isInteger(value)) return "must be a whole number";
    if (kind === "number" && !Number.isFinite(value)) return "must be a number";
    if (kind === "integer" || kind === "number") {
      if (typeof prop.minimum === "number" && value < prop.minimum) return `must be at least ${prop.minimum}`;
      if (typeof prop.maximum === "number" && value > prop.maximum) return `must be at most ${prop.maximum}`;
    }
    if (kind === "string") {
      if (typeof prop.minLength === "number" && value.length < prop.minLength)
        return `must have at least ${prop.minLength} characters`;
      if (typeof prop.maxLength === "number" && value.length > prop.maxLength)
        return `must have at most ${prop.maxLength} characters`;
      if (prop.format === "email" && !EMAIL.test(value)) return "must be an email address";
    }
    if (kind === "array") {
      if (typeof prop.minItems === "number" && value.length < prop.minItems) return `choose at least ${prop.minItems}`;
      if (typeof prop.maxItems === "number" && value.length > prop.maxItems) return `choose at most ${prop.maxItems}`;
    }
    return "";
  }

  // Turn `card` (built by inbox.js for `item`) into a form; `decide(card, verb, body)` sends the answer.
  function fill(card, item, decide, canDecide) {
    const form = item && item.form;
    card.dataset.input = "1";
    card.classList.add("input-card");
    // A form has no arguments to hold whole: what is approved is the content typed here (the server checks it).
    delete card.dataset.partial;
    const hide = [".args-block", ".editor", ".rejecter", ".grant-choice", ".commenter", ".pick", ".partial-note"];
    for (const sel of hide) {
      const part = card.querySelector(sel);
      if (part) part.hidden = true;
    }
    for (const b of card.querySelectorAll(".actions button")) b.hidden = true;
    const caption = card.querySelector(".agent-words figcaption");
    if (caption) {
      caption.textContent = "";
      caption.append("The question — ", node("span", "unverified", "(unverified: the MCP server wrote this)"));
    }
    const box = document.createElement("form");
    box.className = "input-form";
    box.noValidate = true; // our messages, in words, next to each field
    box.setAttribute("aria-label", "Your answer");
    const fields = [];
    if (!form || typeof form !== "object" || !form.properties) {
      box.append(node("p", "note", "This request carries no form this page can read: decline or cancel it."));
    } else {
      const required = new Set(Array.isArray(form.required) ? form.required : []);
      for (const [name, prop] of Object.entries(form.properties).slice(0, MAX_FIELDS)) {
        if (!prop || typeof prop !== "object") continue;
        const row = node("div", "input-row", null);
        const label = node("label", "label", null);
        const head = node("span", "input-title", prop.title || name);
        if (required.has(name)) head.append(node("span", "required", " (required)"));
        label.append(head);
        const input = control(name, prop);
        const said = prop.description ? node("span", "hint", prop.description) : null;
        const message = node("span", "field-error", null);
        message.setAttribute("role", "alert");
        label.append(input);
        row.append(label);
        input.addEventListener("input", () => (message.textContent = "")); // the old word is about the old value
        if (said) row.append(said);
        row.append(message);
        box.append(row);
        fields.push({ name, prop, input, message, required: required.has(name) });
      }
    }
    const buttons = node("div", "input-actions", null);
    const submit = node("button", "primary act-submit", "Submit");
    submit.type = "submit";
    submit.disabled = !form || !canDecide;
    const decline = node("button", "danger act-decline", "Decline");
    decline.type = "button";
    const cancel = node("button", "quiet act-cancel", "Cancel");
    cancel.type = "button";
    decline.disabled = cancel.disabled = !canDecide;
    buttons.append(submit, decline, cancel);
    box.append(buttons);
    card.querySelector(".error").before(box);

    const check = () => {
      const content = {};
      let ok = true;
      for (const f of fields) {
        const value = read(f.input, f.prop);
        const why = problem(f.prop, value, f.required);
        f.message.textContent = why ? `${clip(f.prop.title || f.name, 80)} ${why}` : "";
        f.input.toggleAttribute("aria-invalid", !!why);
        if (why) ok = false;
        if (value !== undefined) content[f.name] = value;
      }
      return ok ? content : null;
    };
    box.addEventListener("submit", (e) => {
      e.preventDefault();
      const content = check();
      if (content) decide(card, "approve", { edited_args: content });
    });
    decline.addEventListener("click", () => decide(card, "reject", { answer: "decline" }));
    cancel.addEventListener("click", () => decide(card, "reject", { answer: "cancel" }));
    // The server's word on a refused answer names the field: show it next to that field too.
    card.addEventListener("goldfive:refused", (e) => {
      const field = e.detail && e.detail.field;
      const f = fields.find((x) => x.name === field);
      if (f) f.message.textContent = clip(e.detail.text || "", 300);
    });
  }

  return { fill };
})();
