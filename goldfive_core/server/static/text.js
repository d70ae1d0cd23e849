// goldfive inbox: text from agents made visible. An agent (or a prompt injection) writes prompts, arguments,
// names and timeline text; characters a person cannot see — bidi overrides that reverse an IBAN, zero-width
// marks, tags — would make the page show something other than what runs. Each such character becomes a
// marked token (⟨U+202E⟩) built as DOM nodes, long values are clipped one by one with a "Show all", and
// arguments are parsed from the record's own JSON text with every number kept exactly.
// The classes of characters are the ones the CLI escapes (goldfive_core/_text.py), plus the default-ignorable
// ones (variation selectors, Hangul fillers) and every space that is not U+0020.
"use strict";

window.goldfiveText = (function () {
  const HIDDEN =
    /[\p{Cc}\p{Cf}\p{Co}\p{Cn}\p{Cs}\p{Zl}\p{Zp}\p{Zs}\p{Default_Ignorable_Code_Point}\u2800\u115F\u1160\u3164\uFFA0]/gu;
  const NAMES = {
    0x09: "tab", 0x0a: "line feed", 0x0d: "carriage return", 0x1b: "escape", 0x7f: "delete",
    0xa0: "no-break space", 0xad: "soft hyphen", 0x34f: "combining grapheme joiner", 0x61c: "arabic letter mark",
    0x115f: "hangul choseong filler", 0x1160: "hangul jungseong filler", 0x180e: "mongolian vowel separator",
    0x200b: "zero width space", 0x200c: "zero width non-joiner", 0x200d: "zero width joiner",
    0x200e: "left-to-right mark", 0x200f: "right-to-left mark", 0x2028: "line separator",
    0x2029: "paragraph separator", 0x202a: "left-to-right embedding", 0x202b: "right-to-left embedding",
    0x202c: "pop directional formatting", 0x202d: "left-to-right override", 0x202e: "right-to-left override",
    0x202f: "narrow no-break space", 0x2060: "word joiner", 0x2061: "function application",
    0x2062: "invisible times", 0x2063: "invisible separator", 0x2064: "invisible plus",
    0x2066: "left-to-right isolate", 0x2067: "right-to-left isolate", 0x2068: "first strong isolate",
    0x2069: "pop directional isolate", 0x2800: "braille pattern blank", 0x3000: "ideographic space",
    0x3164: "hangul filler", 0xfeff: "zero width no-break space (BOM)", 0xffa0: "halfwidth hangul filler",
  };
  const VALUE_LIMIT = 400; // characters of one value shown before "… N more characters"

  function uplus(cp) {
    return "U+" + cp.toString(16).toUpperCase().padStart(4, "0");
  }
  function charName(ch) {
    const cp = ch.codePointAt(0);
    if (NAMES[cp]) return NAMES[cp];
    if (cp >= 0xe0000 && cp <= 0xe007f) return "tag character";
    if ((cp >= 0xfe00 && cp <= 0xfe0f) || (cp >= 0xe0100 && cp <= 0xe01ef) || (cp >= 0x180b && cp <= 0x180f))
      return "variation selector";
    if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f)) return "control character";
    if (/\p{Zs}/u.test(ch)) return "space that is not a plain space";
    if (/\p{Co}/u.test(ch)) return "private-use character";
    if (/\p{Cn}/u.test(ch)) return "unassigned code point";
    if (/\p{Cs}/u.test(ch)) return "lone surrogate";
    if (/\p{Cf}/u.test(ch)) return "invisible format character";
    return "invisible character";
  }
  function isShown(ch, lines) {
    return ch === " " || (lines && (ch === "\n" || ch === "\t"));
  }

  // The hidden characters of `text` with their index; `lines`: line feeds and tabs are wanted (prompts, reasons).
  function hiddenIn(text, lines) {
    const found = [];
    for (const m of String(text).matchAll(HIDDEN)) if (!isShown(m[0], lines)) found.push({ ch: m[0], index: m.index });
    return found;
  }

  function token(ch) {
    const node = document.createElement("span");
    node.className = "uc";
    node.textContent = `⟨${uplus(ch.codePointAt(0))}⟩`;
    node.title = `${uplus(ch.codePointAt(0))} ${charName(ch)}: a character you could not see, shown here`;
    return node;
  }

  // `text` as DOM nodes (text nodes and tokens), never parsed as HTML.
  function visible(text, lines) {
    text = String(text == null ? "" : text);
    const frag = document.createDocumentFragment();
    let last = 0;
    for (const { ch, index } of hiddenIn(text, lines)) {
      if (index > last) frag.append(text.slice(last, index));
      frag.append(token(ch));
      last = index + ch.length;
    }
    if (last < text.length) frag.append(last ? text.slice(last) : text);
    return frag;
  }

  // `text` for an attribute (a tooltip, a label) or an <option>: the tokens as plain text.
  function plain(text) {
    text = String(text == null ? "" : text);
    let out = "";
    let last = 0;
    for (const { ch, index } of hiddenIn(text, false)) {
      out += text.slice(last, index) + `⟨${uplus(ch.codePointAt(0))}⟩`;
      last = index + ch.length;
    }
    return last ? out + text.slice(last) : text;
  }

  // The first `n` UTF-16 units of `s`, never ending inside a surrogate pair.
  function cut(s, n) {
    const code = s.charCodeAt(n - 1);
    return s.slice(0, code >= 0xd800 && code <= 0xdbff ? n - 1 : n);
  }

  // A value shown whole, or its first `limit` characters, "… N more characters" and a Show all button.
  // `literal`: shown as a JSON string literal (quotes and escapes), the count being of the value's own characters.
  function longText(value, limit, opts) {
    const { literal = false, lines = false } = opts || {};
    const s = String(value == null ? "" : value);
    const box = document.createElement("span");
    box.className = "long";
    const render = (t) => (literal ? JSON.stringify(t) : t);
    if (s.length <= limit) {
      box.append(visible(render(s), lines));
      return box;
    }
    const head = cut(s, limit);
    const shown = literal ? render(head).slice(0, -1) : head; // an open literal: the value goes on
    const more = document.createElement("span");
    more.className = "more";
    more.textContent = `… ${(s.length - head.length).toLocaleString("en-US")} more characters`;
    const all = document.createElement("button");
    all.type = "button";
    all.className = "show-all";
    all.textContent = "Show all";
    all.title = `Show all ${s.length.toLocaleString("en-US")} characters of this value`;
    all.addEventListener("click", () => {
      box.textContent = "";
      box.classList.add("whole");
      box.append(visible(render(s), lines));
    });
    box.append(visible(shown, lines), more, " ", all);
    return box;
  }

  // JSON text parsed with every number exactly as written (a JS number loses digits past 2^53: 90071992547409931
  // would read 90071992547409920). Numbers that do not survive become JSON.rawJSON values where the browser has
  // them; elsewhere `inexact` names the first one, and the caller must not claim to show the value.
  const SOURCE_TEXT = (() => {
    try {
      return JSON.parse("[1]", (k, v, ctx) => (k === "0" ? ctx && ctx.source : v))[0] === "1";
    } catch (_) {
      return false;
    }
  })();
  const RAW = typeof JSON.rawJSON === "function" && typeof JSON.isRawJSON === "function";
  function isRaw(value) {
    return RAW && value !== null && typeof value === "object" && JSON.isRawJSON(value);
  }
  function parseExact(text) {
    let inexact = "";
    const keep = (key, value, ctx) => {
      if (typeof value !== "number" || !ctx || typeof ctx.source !== "string") return value;
      if (Number.isFinite(value) && String(value) === ctx.source) return value;
      if (RAW) return JSON.rawJSON(ctx.source);
      inexact = inexact || ctx.source;
      return value;
    };
    let value;
    try {
      value = JSON.parse(text, keep);
    } catch (err) {
      return { value: null, problem: err.message, inexact: "" };
    }
    if (!SOURCE_TEXT && /\d{16,}|\d[eE]/.test(text)) inexact = "a long or exponent number"; // cannot check here
    return { value, problem: "", inexact };
  }

  // `value` as indented JSON built from DOM nodes into `node`: every key and every value shown, each long one
  // clipped on its own (a huge first argument never hides the next ones).
  function jsonInto(node, value, depth) {
    const pad = (d) => "\n" + "  ".repeat(d);
    if (isRaw(value)) node.append(value.rawJSON);
    else if (typeof value === "string") node.append(longText(value, VALUE_LIMIT, { literal: true }));
    else if (value === null || typeof value !== "object") node.append(JSON.stringify(value) ?? "null");
    else {
      const list = Array.isArray(value);
      const keys = list ? value.map((_, i) => i) : Object.keys(value);
      if (!keys.length) {
        node.append(list ? "[]" : "{}");
        return;
      }
      node.append(list ? "[" : "{");
      keys.forEach((k, i) => {
        node.append(pad(depth + 1));
        if (!list) {
          const name = longText(k, VALUE_LIMIT, { literal: true });
          name.classList.add("key");
          node.append(name, ": ");
        }
        jsonInto(node, value[k], depth + 1);
        if (i < keys.length - 1) node.append(",");
      });
      node.append(pad(depth) + (list ? "]" : "}"));
    }
  }
  function showJson(node, value) {
    node.textContent = "";
    if (typeof value === "string") node.append(longText(value, VALUE_LIMIT * 10, {})); // not JSON: as it came
    else jsonInto(node, value, 0);
  }

  // Indented JSON for the editor (a textarea cannot mark characters): every hidden character inside a string is
  // written as its \u escape, which JSON reads back as the same character, so an untouched edit is the call itself.
  function editableJson(value) {
    const text = JSON.stringify(value, null, 2) ?? "";
    return text.replace(HIDDEN, (ch) => (ch === " " || ch === "\n" ? ch : escapeUnits(ch)));
  }
  function escapeUnits(ch) {
    let out = "";
    for (let i = 0; i < ch.length; i++) out += "\\u" + ch.charCodeAt(i).toString(16).padStart(4, "0");
    return out;
  }

  // fn(where, text) for every key and every string of `value` (where: its path, e.g. "to" or "items[2].iban").
  function eachText(value, path, fn) {
    if (isRaw(value) || value === null || typeof value !== "object") {
      if (typeof value === "string") fn(path || "(arguments)", value);
      return;
    }
    const list = Array.isArray(value);
    for (const k of list ? value.map((_, i) => i) : Object.keys(value)) {
      const sub = list ? `${path}[${k}]` : path ? `${path}.${k}` : String(k);
      if (!list) fn(sub + " (its name)", String(k));
      eachText(value[k], sub, fn);
    }
  }

  // What hidden characters `fields` ([where, text, lines?]) hold: "U+202E right-to-left override in iban; …", or "".
  function hiddenSummary(fields) {
    const found = new Map();
    for (const [where, text, lines] of fields) {
      for (const { ch } of hiddenIn(text, lines)) {
        const cp = ch.codePointAt(0);
        const entry = found.get(cp) || { ch, count: 0, where: [] };
        entry.count++;
        if (!entry.where.includes(where)) entry.where.push(where);
        found.set(cp, entry);
      }
    }
    const parts = [...found.values()].map(({ ch, count, where }) => {
      const at = where.slice(0, 4).map((w) => cut(String(w), 60)).join(", ") + (where.length > 4 ? ", …" : "");
      return `${uplus(ch.codePointAt(0))} ${charName(ch)}${count > 1 ? ` ×${count}` : ""} in ${at}`;
    });
    return parts.join("; ");
  }

  // Words mixing letters of scripts that look alike (a Cyrillic "А" in "АCME"): "“АCME” in argument to mixes Latin
  // and Cyrillic letters: U+0410 is Cyrillic; …", or "". `fields` as for hiddenSummary.
  const LOOKALIKE = ["Latin", "Cyrillic", "Greek", "Armenian", "Cherokee"].map((name) => ({
    name,
    re: new RegExp(`\\p{Script=${name}}`, "u"),
  }));
  function mixedScripts(fields) {
    const parts = [];
    for (const [where, text] of fields) {
      for (const word of String(text).match(/[\p{L}\p{M}\p{N}]+/gu) || []) {
        if (parts.length >= 6) break;
        if (!/[^\x00-\x7f]/.test(word)) continue;
        const seen = LOOKALIKE.filter((s) => s.re.test(word));
        if (seen.length < 2) continue;
        const main = seen[0]; // Latin when it is there: the others are the look-alikes
        const odd = [...word].filter((ch) => !main.re.test(ch) && seen.some((s) => s.re.test(ch))).slice(0, 4);
        const which = odd.map((ch) => `${uplus(ch.codePointAt(0))} is ${seen.find((s) => s.re.test(ch)).name}`);
        parts.push(`“${cut(word, 40)}” in ${cut(String(where), 60)} mixes ${seen.map((s) => s.name).join(" and ")} ` +
          `letters: ${which.join(", ")}`);
      }
    }
    return parts.join("; ");
  }

  // Raw hidden characters typed or pasted into an editor: "U+200B zero width space at line 3, column 14; …".
  function hiddenPositions(text) {
    return hiddenIn(text, true)
      .slice(0, 8)
      .map(({ ch, index }) => {
        const before = text.slice(0, index);
        const line = before.split("\n").length;
        const column = index - before.lastIndexOf("\n");
        return `${uplus(ch.codePointAt(0))} ${charName(ch)} at line ${line}, column ${column}`;
      })
      .join("; ");
  }
  function escapeRaw(text) {
    return text.replace(HIDDEN, (ch) => (isShown(ch, true) || ch === "\r" ? ch : escapeUnits(ch)));
  }

  return {
    VALUE_LIMIT, cut, editableJson, eachText, escapeRaw, hiddenIn, hiddenPositions, hiddenSummary, isRaw,
    longText, mixedScripts, parseExact, plain, showJson, visible,
  };
})();
