// Feedback on an answer: helpful or not, and what actually fixed it. The service stores it with the run
// and, for a run about one machine and fault code, makes the fix one of that fault's past fixes.
//
// It goes through the tablet's write queue (FixloopConnection.writes), keyed by the run: given offline,
// it is kept on the tablet, sent when the service is in reach, and a later word on the same answer
// replaces the queued one. What is typed lives here, per run, not in the DOM, which is redrawn often.
"use strict";

(function () {
  const forms = new Map(); // run id -> {helpful, fix, state: null | "queued" | "saved" | "refused", detail}

  function keyOf(runId) {
    return "feedback:" + runId;
  }

  function queued(runId) {
    return window.FixloopConnection.writes.list().some((w) => w.key === keyOf(runId));
  }

  // A queued write was delivered or refused: the form of its run says so next time it is drawn.
  function settle(item, err) {
    const form = item.key.startsWith("feedback:") && forms.get(item.key.slice("feedback:".length));
    if (!form) return;
    form.state = err ? "refused" : "saved";
    form.detail = err ? err.message : null;
    if (form.redraw) form.redraw();
  }

  function send(runId, form, flush) {
    window.FixloopConnection.writes.add(keyOf(runId), `/v1/runs/${encodeURIComponent(runId)}/feedback`, {
      helpful: form.helpful,
      fix: form.fix.trim() || null,
    });
    form.state = "queued";
    form.redraw();
    flush();
  }

  // A stored run shown again: what was said on it before (`GET /v1/runs/{id}`'s feedback, oldest first).
  function seed(runId, given) {
    const last = given[given.length - 1];
    if (last && !forms.has(runId)) forms.set(runId, { helpful: last.helpful, fix: last.fix || "", state: "saved" });
  }

  // runId: the stored run on screen; flush(): sends the tablet's queued writes now if it can.
  function control({ runId, ui, flush }) {
    if (!forms.has(runId)) forms.set(runId, { helpful: null, fix: "", state: queued(runId) ? "queued" : null });
    const form = forms.get(runId);
    const root = ui.el("div", { class: "feedback", "data-testid": "feedback" });
    form.redraw = () => draw(root, runId, form, ui, flush);
    form.redraw();
    return root;
  }

  function draw(root, runId, form, ui, flush) {
    const { el, t } = ui;
    const choice = (helpful, key) => el("button", {
      type: "button",
      class: form.helpful === helpful ? "primary" : "secondary",
      "aria-pressed": String(form.helpful === helpful),
      "data-testid": helpful ? "feedback-helpful" : "feedback-not-helpful",
      text: t(key),
      onclick: () => { form.helpful = helpful; send(runId, form, flush); },
    });
    const fix = el("textarea", {
      rows: 2, name: "fix", placeholder: t("feedback_fix_placeholder"), "data-testid": "feedback-fix",
      oninput: (e) => { form.fix = e.target.value; },
    });
    fix.value = form.fix;
    const status = form.state ? el("div", {
      class: form.state === "refused" ? "error-text" : form.state === "saved" ? "ok-text" : "muted small",
      role: form.state === "refused" ? "alert" : null,
      "data-testid": "feedback-state",
      text: t("feedback_" + form.state, { detail: form.detail || "" }),
    }) : null;
    root.replaceChildren(...[
      el("h4", { text: t("feedback_title") }),
      el("div", { class: "buttons" }, choice(true, "feedback_helpful"), choice(false, "feedback_not_helpful")),
      el("label", { class: "field" }, el("span", { text: t("feedback_fix") }), fix),
      el("button", {
        type: "button", class: "ghost", "data-testid": "feedback-send", disabled: form.helpful === null,
        text: t("feedback_send"), onclick: () => send(runId, form, flush),
      }),
      status,
    ].filter(Boolean));
  }

  window.FixloopFeedback = { control, seed, settle };
})();
