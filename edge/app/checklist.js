// The remedy's steps as a checklist on the run's work order: the plant's isolation steps first, then the
// manual entry's steps, as the run's manual observation gave them. Each tick is kept on the order with who
// and when (POST /v1/work-orders/{id}/checklist); a step naming a sensor ("(sensor motor_temp)") shows its
// live reading, and the service reads it again through the PLC tool to keep it with the tick.
//
// Ticks go through the tablet's write queue (FixloopConnection.writes), one key per tick, so a tick made
// offline is kept on the tablet and sent once in reach; its client_tick_id makes a resend apply once.
// What is shown lives here, per order, not in the DOM, which is redrawn often.
"use strict";

(function () {
  // As manuals and the plant config cite a sensor: "(sensor motor_temp)", "（传感器 motor_temp）".
  const SENSOR = /[(（]\s*(?:sensor|传感器)\s+([a-z][a-z0-9_]*)\s*[)）]/i;
  const NAME_KEY = "fixloop.name";
  const PREFIX = "tick:";
  const lists = new Map(); // order id -> {ticks: Map step key -> tick state, readings: Map sensor -> read, loaded}

  function technician() {
    return localStorage.getItem(NAME_KEY) || "";
  }

  function setTechnician(name) {
    localStorage.setItem(NAME_KEY, name.trim());
  }

  function newTickId() {
    const random = Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, "0"));
    return Date.now().toString(36) + "-" + random.join("");
  }

  // The isolation items, then the first entry's steps (a later entry's steps start again at n = 1).
  function stepsOf(observations) {
    for (const obs of observations) {
      const content = obs.content || [];
      const isolation = content.filter((i) => i.fields && i.fields.isolation_step !== undefined)
        .map((i) => ({ key: "isolation:" + i.fields.isolation_step, text: i.text, isolation: true }));
      const steps = [];
      for (const item of content) {
        if (item.kind !== "step") continue;
        const n = item.fields && item.fields.n ? item.fields.n : steps.length + 1;
        if (n === 1 && steps.length) break;
        steps.push({ key: "step:" + n, text: item.text, isolation: false });
      }
      if (steps.length) {
        return [...isolation, ...steps].map((s) => {
          const match = SENSOR.exec(s.text);
          return Object.assign(s, { sensor: match ? match[1] : null });
        });
      }
    }
    return [];
  }

  function listOf(orderId) {
    if (!lists.has(orderId)) lists.set(orderId, { ticks: new Map(), readings: new Map(), loaded: false, steps: [] });
    return lists.get(orderId);
  }

  // The order's recorded ticks (the latest per step), then the ticks still queued on this tablet.
  async function load(orderId, token) {
    const list = listOf(orderId);
    const order = await (await window.FixloopRequest.request("/v1/work-orders/" + encodeURIComponent(orderId), token)).json();
    for (const tick of order.checklist || []) {
      list.ticks.set(tick.step_key, { done: tick.done, by: tick.by, at: tick.at, reading: tick.reading, state: "saved" });
    }
    for (const w of window.FixloopConnection.writes.list()) {
      if (w.key.startsWith(PREFIX + orderId + ":")) {
        list.ticks.set(w.body.step_key, { done: w.body.done, by: w.body.by, at: w.body.ticked_at, state: "queued" });
      }
    }
    list.loaded = true;
  }

  async function readSensor(list, deviceId, sensor, token) {
    try {
      const path = `/v1/devices/${encodeURIComponent(deviceId)}/sensors/${encodeURIComponent(sensor)}/reading`;
      list.readings.set(sensor, await (await window.FixloopRequest.request(path, token)).json());
    } catch (err) {
      list.readings.set(sensor, { reading: null, text: err.message });
    }
  }

  function tick(orderId, step, done, flush, t) {
    const list = listOf(orderId);
    const by = technician();
    if (!by) {
      list.message = t("check_need_name");
      list.redraw();
      return;
    }
    const id = newTickId();
    const body = { client_tick_id: id, step_key: step.key, text: step.text, done, by, ticked_at: new Date().toISOString() };
    if (step.sensor) body.sensor = step.sensor;
    window.FixloopConnection.writes.add(`${PREFIX}${orderId}:${id}`, `/v1/work-orders/${encodeURIComponent(orderId)}/checklist`, body);
    list.message = null;
    list.ticks.set(step.key, { done, by, at: body.ticked_at, state: "queued" });
    list.redraw();
    flush();
  }

  // A queued tick was delivered or refused: its order's list shows what the service now records.
  function settle(item, err) {
    if (!item.key.startsWith(PREFIX)) return;
    const orderId = item.key.slice(PREFIX.length).split(":")[0];
    const list = lists.get(orderId);
    if (!list) return;
    if (err) {
      list.ticks.set(item.body.step_key, { done: !item.body.done, state: "refused", detail: err.message });
      if (list.redraw) list.redraw();
      return;
    }
    if (list.token) load(orderId, list.token).catch(() => {}).then(() => list.redraw && list.redraw());
  }

  // What the close form starts with: the ticked steps as the remedy, the readings kept with them as the note.
  function prefill(orderId, t) {
    const list = lists.get(orderId);
    if (!list) return null;
    const done = list.steps.filter((s) => (list.ticks.get(s.key) || {}).done);
    const readings = done.map((s) => (list.ticks.get(s.key) || {}).reading).filter((r) => r && r.value !== null && r.value !== undefined);
    if (!done.length) return null;
    return {
      remedy: done.map((s) => s.text).join("\n"),
      note: readings.map((r) => t("check_note_reading", { label: r.label || r.sensor, value: r.value, unit: r.unit, quality: r.quality })).join("\n"),
    };
  }

  // order: {id, device_id}; observations: the run's; flush(): sends the tablet's queued writes now if it can.
  function control({ order, observations, token, ui, flush }) {
    const steps = stepsOf(observations);
    if (!steps.length) return null;
    const list = listOf(order.id);
    list.steps = steps;
    list.token = token;
    const root = ui.el("section", { class: "checklist", "data-testid": "checklist" });
    list.redraw = () => draw(root, list, order, token, ui, flush);
    list.redraw();
    if (!list.loaded) load(order.id, token).then(() => list.redraw()).catch(() => {});
    for (const step of steps) {
      if (step.sensor && !list.readings.has(step.sensor)) {
        list.readings.set(step.sensor, null);
        readSensor(list, order.device_id, step.sensor, token).then(() => list.redraw());
      }
    }
    return root;
  }

  function stateLine(ui, state) {
    const { el, t } = ui;
    if (!state) return null;
    const when = state.at ? new Date(state.at).toLocaleTimeString(ui.lang === "zh" ? "zh-CN" : undefined) : "";
    const text = state.state === "refused" ? t("check_refused", { detail: state.detail })
      : state.state === "queued" ? t("check_queued")
        : t(state.done ? "check_done_by" : "check_undone_by", { by: state.by, time: when });
    return el("div", { class: state.state === "refused" ? "error-text small" : "muted small", "data-testid": "check-state", text });
  }

  function readingLine(ui, step, list) {
    const { el, t } = ui;
    const kept = (list.ticks.get(step.key) || {}).reading;
    const live = list.readings.get(step.sensor);
    const r = kept || (live && live.reading);
    if (!r) {
      return el("div", { class: "muted small", "data-testid": "check-reading", text: live ? t("check_no_reading", { detail: live.text }) : t("check_reading_wait") });
    }
    const value = r.value === null || r.value === undefined ? "—" : `${r.value} ${r.unit || ""}`.trim();
    const key = kept ? "check_reading_kept" : r.source === "live" ? "check_reading_live" : "check_reading_cache";
    return el("div", { class: "check-reading", "data-testid": "check-reading" },
      el("span", { class: "value-small", text: t(key, { label: r.label || r.sensor, value, quality: r.quality }) }),
      kept ? null : el("button", { type: "button", class: "ghost small", "data-testid": "check-read-again", text: t("check_read_again"),
        onclick: () => readSensor(list, step.deviceId, step.sensor, list.token).then(() => list.redraw()) }));
  }

  function draw(root, list, order, token, ui, flush) {
    const { el, t } = ui;
    const nameInput = el("input", { name: "technician", "data-testid": "checklist-name", placeholder: t("check_name_placeholder"),
      autocomplete: "name", oninput: (e) => { setTechnician(e.target.value); } });
    nameInput.value = technician();
    const items = list.steps.map((step) => {
      step.deviceId = order.device_id;
      const state = list.ticks.get(step.key);
      const box = el("input", { type: "checkbox", "data-testid": "check-box",
        onchange: (e) => tick(order.id, step, e.target.checked, flush, t) });
      box.checked = Boolean(state && state.done);
      return el("li", { class: "check-step" + (step.isolation ? " isolation" : ""), "data-testid": "check-step", "data-key": step.key },
        el("label", { class: "check-label" }, box, el("span", { text: step.text })),
        step.sensor ? readingLine(ui, step, list) : null,
        stateLine(ui, state));
    });
    const firstSteps = list.steps.findIndex((s) => !s.isolation);
    const heading = (key) => el("li", { class: "check-heading", text: t(key) });
    if (list.steps[0].isolation) items.splice(0, 0, heading("check_isolation"));
    if (firstSteps >= 0) items.splice(firstSteps + (list.steps[0].isolation ? 1 : 0), 0, heading("check_steps"));
    root.replaceChildren(...[
      el("h5", { text: t("check_title", { id: order.id }) }),
      el("label", { class: "field" }, el("span", { text: t("check_name") }), nameInput),
      list.message ? el("div", { class: "error-text", role: "alert", "data-testid": "check-error", text: list.message }) : null,
      el("ul", { class: "check-list" }, items),
    ].filter(Boolean));
  }

  window.FixloopChecklist = { control, settle, prefill, technician, setTechnician };
})();
