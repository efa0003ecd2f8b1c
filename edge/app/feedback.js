// Feedback on an answer: helpful or not, and what actually fixed it. The service stores it with the run
// and, for a run about one machine and fault code, makes the fix one of that fault's past fixes: an
// unverified report by whoever gave it until a supervisor confirms it. Each person's fix is their own
// (the tablet sends the name the technician gave, the one the checklist uses); sending no fix takes
// back the one this person gave before.
//
// It goes through the tablet's write queue (FixloopConnection.writes), keyed by the run: given offline,
// it is kept on the tablet, sent when the service is in reach, and a later word on the same answer
// replaces the queued one. A confirmation is sent at once: it vouches for the text on screen now.
// What is typed lives here, per run, not in the DOM, which is redrawn often.
"use strict";

(function () {
  // run id -> {helpful, fix, state: null | "queued" | "saved" | "refused" | "need_name", detail,
  //            reports: [feedback rows with a fix, as the service gave them], confirming: {actor: message key}}
  const forms = new Map();

  function keyOf(runId) {
    return "feedback:" + runId;
  }

  function queued(runId) {
    return window.FixloopConnection.writes.list().some((w) => w.key === keyOf(runId));
  }

  function me() {
    return window.FixloopChecklist ? window.FixloopChecklist.technician() : "";
  }

  function formOf(runId) {
    if (!forms.has(runId)) {
      forms.set(runId, { helpful: null, fix: "", state: queued(runId) ? "queued" : null, reports: [], confirming: {} });
    }
    return forms.get(runId);
  }

  // A queued write was delivered or refused: the form of its run says so next time it is drawn.
  function settle(item, err) {
    const form = item.key.startsWith("feedback:") && forms.get(item.key.slice("feedback:".length));
    if (!form) return;
    form.state = err ? "refused" : "saved";
    form.detail = err ? err.message : null;
    if (!err) keepReport(form, { actor: item.body.by || "technician", fix: item.body.fix, confirmed_by: null });
    if (form.redraw) form.redraw();
  }

  // The reports shown under the form: one per person, theirs replaced by their latest word.
  function keepReport(form, given) {
    form.reports = form.reports.filter((r) => r.actor !== given.actor);
    if (given.fix) form.reports.push(given);
  }

  function send(runId, form, flush) {
    const fix = form.fix.trim() || null;
    const by = me();
    if (fix && !by) {
      form.state = "need_name";
      form.redraw();
      return;
    }
    const body = { helpful: form.helpful, fix };
    if (by) body.by = by;
    window.FixloopConnection.writes.add(keyOf(runId), `/v1/runs/${encodeURIComponent(runId)}/feedback`, body);
    form.state = "queued";
    form.redraw();
    flush();
  }

  async function confirm(runId, form, report, token) {
    const by = me();
    if (!by) {
      form.confirming[report.actor] = "feedback_need_name";
      form.redraw();
      return;
    }
    try {
      const response = await window.FixloopRequest.request(`/v1/runs/${encodeURIComponent(runId)}/feedback/confirm`,
        token, { method: "POST", json: { reporter: report.actor, by } });
      keepReport(form, (await response.json()).feedback);
      delete form.confirming[report.actor];
    } catch (err) {
      // 401: this tablet's token is a technician's; confirming needs a supervisor's.
      form.confirming[report.actor] = err.status === 401 ? "report_confirm_denied" : { detail: err.message };
    }
    form.redraw();
  }

  // A stored run shown again: what was said on it before (`GET /v1/runs/{id}`'s feedback, oldest first),
  // this tablet's own word in the form and everyone's fix below it.
  function seed(runId, given) {
    const form = formOf(runId);
    form.reports = given.filter((g) => g.fix);
    const mine = given.filter((g) => g.actor === (me() || "technician")).pop();
    if (mine && form.helpful === null && !queued(runId)) Object.assign(form, { helpful: mine.helpful, fix: mine.fix || "", state: "saved" });
  }

  // runId: the stored run on screen; token: the tablet's; flush(): sends the tablet's queued writes now if it can.
  function control({ runId, token, ui, flush }) {
    const form = formOf(runId);
    const root = ui.el("div", { class: "feedback", "data-testid": "feedback" });
    form.redraw = () => draw(root, runId, form, token, ui, flush);
    form.redraw();
    return root;
  }

  function reportLine(runId, form, report, token, ui) {
    const { el, t } = ui;
    const mine = report.actor === me();
    const trust = report.confirmed_by
      ? el("span", { class: "ok-text", text: t("report_confirmed", { by: report.confirmed_by }) })
      : el("span", { class: "chip unverified", text: t("report_unverified") });
    const note = form.confirming[report.actor];
    return el("li", { "data-testid": "feedback-report", "data-reporter": report.actor },
      el("div", {}, el("strong", { text: report.actor + ": " }), report.fix),
      el("div", { class: "small" }, trust,
        !report.confirmed_by && !mine ? el("button", {
          type: "button", class: "ghost", "data-testid": "report-confirm", text: t("report_confirm"),
          onclick: () => confirm(runId, form, report, token),
        }) : null),
      note ? el("div", { class: "error-text", role: "alert", "data-testid": "report-state",
        text: typeof note === "string" ? t(note) : t("feedback_refused", note) }) : null);
  }

  function draw(root, runId, form, token, ui, flush) {
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
    const name = el("input", {
      name: "technician", autocomplete: "name", "data-testid": "feedback-name", placeholder: t("check_name_placeholder"),
      oninput: (e) => { if (window.FixloopChecklist) window.FixloopChecklist.setTechnician(e.target.value); },
    });
    name.value = me();
    const status = form.state ? el("div", {
      class: form.state === "refused" || form.state === "need_name" ? "error-text" : form.state === "saved" ? "ok-text" : "muted small",
      role: form.state === "refused" || form.state === "need_name" ? "alert" : null,
      "data-testid": "feedback-state",
      text: t("feedback_" + form.state, { detail: form.detail || "" }),
    }) : null;
    const mine = form.helpful !== null && form.fix.trim() && form.reports.some((r) => r.actor === me());
    root.replaceChildren(...[
      el("h4", { text: t("feedback_title") }),
      el("div", { class: "buttons" }, choice(true, "feedback_helpful"), choice(false, "feedback_not_helpful")),
      el("label", { class: "field" }, el("span", { text: t("feedback_fix") }), fix),
      el("label", { class: "field" }, el("span", { text: t("check_name") }), name),
      el("div", { class: "buttons" },
        el("button", {
          type: "button", class: "ghost", "data-testid": "feedback-send", disabled: form.helpful === null,
          text: t("feedback_send"), onclick: () => send(runId, form, flush),
        }),
        mine ? el("button", {
          type: "button", class: "ghost", "data-testid": "feedback-withdraw", text: t("feedback_withdraw"),
          onclick: () => { form.fix = ""; send(runId, form, flush); },
        }) : null),
      status,
      form.reports.length ? el("h5", { text: t("reports_title") }) : null,
      form.reports.length ? el("ul", { class: "reports" }, form.reports.map((r) => reportLine(runId, form, r, token, ui))) : null,
    ].filter(Boolean));
  }

  window.FixloopFeedback = { control, seed, settle };
})();
