// The reviewer's verdict on a card: which reviewer judged the call before a person, what it said and why.
// Every field was written by the agent's process (the reviewer runs in its gate): shown as text nodes only.
"use strict";

window.goldfiveReview = (function () {
  const T = window.goldfiveText;
  const SAYS = { allow: "would allow this call", deny: "would deny this call", ask: "asks a person to decide" };

  function span(cls, text) {
    const node = document.createElement("span");
    node.className = cls;
    node.append(T.visible(String(text == null ? "" : text)));
    return node;
  }
  function clip(text, n) {
    text = String(text == null ? "" : text);
    return text.length > n ? T.cut(text, n) + ` … (${text.length - n} more characters not shown)` : text;
  }

  // Show (or refresh, or hide) the reviewer's line on `card` for `item`, an approval as the API gives it.
  function show(card, item) {
    const review = item && item.review;
    let box = card.querySelector(".review");
    if (!review) {
      if (box) box.hidden = true;
      return;
    }
    if (!box) {
      box = document.createElement("p");
      box.className = "review";
      box.setAttribute("role", "note");
      const policy = card.querySelector(".policy");
      if (policy) policy.after(box);
      else card.append(box);
    }
    box.hidden = false;
    box.textContent = "";
    const failed = !!review.error;
    box.dataset.verdict = failed ? "failed" : String(review.verdict || "ask");
    box.append(span("review-by", clip(review.by, 120)));
    box.append(span("review-verdict", failed ? "gave no verdict: a person decides" : SAYS[review.verdict] || SAYS.ask));
    if (review.reason) box.append(span("review-reason", `“${clip(review.reason, 1000)}”`));
    if (failed) box.append(span("review-error", clip(review.error, 500)));
    if (review.note) box.append(span("review-note", clip(review.note, 300)));
    if (review.verified === false) {
      box.append(span("review-unverified", `Not verified: ${clip(review.verified_note, 300)}`));
    }
  }

  return { show };
})();
