// Closing a work order from the tablet with what was found and done (cause, remedy, parts, note): the
// next time the fault comes back, the work-order tool shows this fix.
//
// An order reaches done only through acknowledged and in_progress (TRANSITIONS in
// tools/work_orders/model.py): the form takes the steps still missing, from the order's current status,
// and sends the fix with the last one. A step that fails leaves the order where it got to, a legal
// status; submitting again goes on from there.
//
// The move to in_progress starts the hands-on work: where the plant lists the device's isolation steps, the
// form asks the technician to confirm them done, with their name, and sends that confirmation with the move;
// the service refuses it (409, the reading in its words) while the device's zero-energy signal reads
// energised. Opened on a run's order, the form starts from its checklist (FixloopChecklist.prefill).
//
// Cards and lists are redrawn often: what is typed lives here, per place and order, not in the DOM.
"use strict";

(function () {
  const NEXT = { open: "acknowledged", acknowledged: "in_progress", in_progress: "done" };
  const forms = new Map(); // `${place}:${order id}` -> {open, busy, values, message, ok, progress}
  // "×" may touch the name; an ASCII x or * needs a space before it, so "M8x20 bolt" stays a name.
  const PART = /^(.*?)(?:(?:\s*×|\s+[xX*])\s*(\d+(?:[.,]\d+)?))?$/;

  function pathFrom(status) {
    const steps = [];
    for (let s = NEXT[status]; s; s = NEXT[s]) steps.push(s);
    return steps;
  }

  // "coolant filter ×2" -> {part, quantity}; a line without ×qty is a part whose quantity was not counted.
  function parseParts(text, t) {
    const parts = [];
    text.split("\n").forEach((raw, i) => {
      const line = raw.trim();
      if (!line) return;
      const match = PART.exec(line);
      const quantity = match && match[2] !== undefined ? Number(match[2].replace(",", ".")) : null;
      if (!match || !match[1] || quantity === 0) throw new Error(t("close_bad_part", { n: i + 1, line }));
      parts.push(quantity === null ? { part: match[1] } : { part: match[1], quantity });
    });
    return parts;
  }

  // The order's status now, not when the card was drawn: another tablet or the MES may have moved it.
  async function currentStatus(order, token, t) {
    const query = `?device_id=${encodeURIComponent(order.device_id)}&limit=200`;
    const active = await (await window.FixloopRequest.request("/v1/work-orders" + query, token)).json();
    const found = active.find((o) => o.id === order.id);
    if (!found) throw new Error(t("close_gone", { id: order.id }));
    return found.status;
  }

  async function submit(form, order, token, ui, onClosed, isolation) {
    const { t } = ui;
    const v = form.values;
    form.message = null;
    let fix;
    try {
      fix = { cause: v.cause.trim(), remedy: v.remedy.trim(), parts: parseParts(v.parts, t), note: v.note.trim() };
    } catch (err) {
      form.message = t("close_error", { detail: err.message });
      return;
    }
    const confirming = isolation && pathFrom(order.status).includes("in_progress");
    if (confirming && (!v.isolated || !v.by.trim())) {
      form.message = t(v.isolated ? "isolation_need_name" : "isolation_need_confirm");
      return;
    }
    form.busy = true;
    form.redraw();
    try {
      let status = await currentStatus(order, token, t);
      let closed = null;
      for (const next of pathFrom(status)) {
        form.progress = next;
        form.redraw();
        const body = next === "done" ? Object.assign({ status: next }, fix) : { status: next };
        if (next === "in_progress" && confirming) Object.assign(body, { isolation_confirmed: true, by: v.by.trim() });
        let response;
        try {
          response = await window.FixloopRequest.request(`/v1/work-orders/${encodeURIComponent(order.id)}/status`, token,
            { method: "POST", json: body });
        } catch (err) {
          if (next === "in_progress" && confirming && err.status === 409) err.isolation = true;
          throw err;
        }
        closed = await response.json();
        status = closed.status;
      }
      form.ok = t("closed_ok", { id: order.id });
      form.open = false;
      onClosed(closed);
    } catch (err) {
      form.message = t(err.isolation ? "isolation_refused" : "close_error", { detail: err.message });
    } finally {
      form.busy = false;
      form.progress = null;
    }
  }

  function field(ui, form, name, label, multiline, placeholder) {
    const input = ui.el(multiline ? "textarea" : "input", {
      name, rows: multiline ? 2 : null, placeholder, "data-testid": "close-" + name,
      oninput: (e) => { form.values[name] = e.target.value; },
    });
    input.value = form.values[name];
    return ui.el("label", { class: "field" }, ui.el("span", { text: label }), input);
  }

  // order: {id, status, device_id}; place: where it is drawn ("card", "list"); onClosed(work order);
  // isolation: the device's lock-out from /v1/devices ({energy_sources, steps: [{text, text_zh}]}) or null.
  function control({ order, place, token, ui, onClosed, isolation }) {
    const key = `${place}:${order.id}`;
    if (!forms.has(key)) {
      forms.set(key, { open: false, busy: false, values: { cause: "", remedy: "", parts: "", note: "", isolated: false, by: "" } });
    }
    const form = forms.get(key);
    const root = ui.el("div", { class: "close-order", "data-testid": "close-order" });
    form.redraw = () => draw(root, form, order, token, ui, onClosed, isolation || null);
    form.redraw();
    return root;
  }

  function opened(form, order, ui) {
    const checklist = window.FixloopChecklist;
    const start = checklist && checklist.prefill(order.id, ui.t);
    const v = form.values;
    if (start && !v.remedy && !v.note) Object.assign(v, start);
    if (checklist && !v.by) v.by = checklist.technician();
    form.open = true;
    form.message = null;
  }

  function isolationFields(ui, form, isolation) {
    const { el, t } = ui;
    const v = form.values;
    const box = el("input", { type: "checkbox", "data-testid": "isolation-confirm", onchange: (e) => { v.isolated = e.target.checked; } });
    box.checked = v.isolated;
    const by = el("input", { name: "by", "data-testid": "isolation-by", autocomplete: "name",
      oninput: (e) => { v.by = e.target.value; if (window.FixloopChecklist) window.FixloopChecklist.setTechnician(e.target.value); } });
    by.value = v.by;
    return el("fieldset", { class: "isolation", "data-testid": "isolation" },
      el("legend", { text: t("isolation_title", { sources: isolation.energy_sources.map((s) => t("energy_" + s)).join(t("list_sep")) }) }),
      el("ol", { class: "isolation-steps" }, isolation.steps.map((s) => el("li", { text: ui.lang === "zh" && s.text_zh ? s.text_zh : s.text }))),
      el("label", { class: "check-label" }, box, el("span", { text: t("isolation_confirm") })),
      el("label", { class: "field" }, el("span", { text: t("isolation_by") }), by));
  }

  function draw(root, form, order, token, ui, onClosed, isolation) {
    const { el, t } = ui;
    const message = form.message ? el("div", { class: "error-text", role: "alert", "data-testid": "close-error", text: form.message }) : null;
    const ok = form.ok ? el("div", { class: "ok-text", "data-testid": "close-ok", text: form.ok }) : null;
    if (!form.open) {
      const active = NEXT[order.status] !== undefined;
      const opener = active && !form.ok ? el("button", {
        type: "button", class: "secondary", "data-testid": "close-open", text: t("close_order"),
        onclick: () => { opened(form, order, ui); form.redraw(); },
      }) : null;
      // Unlike el(), replaceChildren draws a null as the text "null": only the parts there are.
      root.replaceChildren(...[ok, message, opener].filter(Boolean));
      return;
    }
    const path = pathFrom(order.status);
    root.replaceChildren(el("form", {
      class: "close-form", "data-testid": "close-form",
      onsubmit: (e) => {
        e.preventDefault();
        if (!form.busy) submit(form, order, token, ui, onClosed, isolation).then(() => form.redraw());
      },
    },
    el("h5", { text: t("close_title", { id: order.id }) }),
    path.length > 1 ? el("div", { class: "muted small", "data-testid": "close-path", text: t("close_path", { path: path.join(" → ") }) }) : null,
    isolation && path.includes("in_progress") ? isolationFields(ui, form, isolation) : null,
    field(ui, form, "cause", t("close_cause"), false),
    field(ui, form, "remedy", t("close_remedy"), true),
    field(ui, form, "parts", t("close_parts"), true, t("close_parts_placeholder")),
    field(ui, form, "note", t("close_note"), true),
    message,
    el("div", { class: "buttons" },
      el("button", { type: "submit", class: "primary", "data-testid": "close-submit", disabled: form.busy,
        text: form.busy ? t("closing", { status: form.progress || "…" }) : t("close_submit") }),
      el("button", { type: "button", class: "ghost", "data-testid": "close-cancel", disabled: form.busy,
        text: t("close_cancel"), onclick: () => { form.open = false; form.message = null; form.redraw(); } }))));
  }

  window.FixloopOrderClose = { control };
})();
