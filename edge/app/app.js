// The technicians' tablet app: ask, watch the steps stream in, act on the answer.
// No build step: plain DOM code served as it is by the fixloop service.
"use strict";

(function () {
  const STRINGS = window.FIXLOOP_STRINGS;
  const $ = (id) => document.getElementById(id);

  const state = {
    token: localStorage.getItem("fixloop.token") || "",
    lang: localStorage.getItem("fixloop.lang") || ((navigator.language || "en").toLowerCase().startsWith("zh") ? "zh" : "en"),
    devices: [],
    toolRoles: {}, // tool name -> what it is for (manual, plc, order), from /v1/tools
    sessionId: null,
    run: null, // {runId, question, deviceId, events, running, order, takeover}
    lastAsk: null,
  };

  // -- text ---------------------------------------------------------------

  function t(key, vars) {
    const text = (STRINGS[state.lang] && STRINGS[state.lang][key]) || STRINGS.en[key] || key;
    return text.replace(/\{(\w+)\}/g, (_, name) => (vars && vars[name] !== undefined && vars[name] !== null ? vars[name] : "?"));
  }

  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === null || value === undefined || value === false) continue;
      if (name === "class") node.className = value;
      else if (name === "text") node.textContent = value;
      else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else node.setAttribute(name, value);
    }
    for (const child of children.flat()) {
      if (child !== null && child !== undefined && child !== false) node.append(child);
    }
    return node;
  }

  function age(seconds) {
    if (typeof seconds !== "number") return "?";
    if (seconds < 90) return t("age_s", { n: Math.round(seconds) });
    if (seconds < 5400) return t("age_min", { n: Math.round(seconds / 60) });
    return t("age_h", { n: (seconds / 3600).toFixed(1) });
  }

  function device(id) {
    return state.devices.find((d) => d.id === id);
  }

  function deviceName(id) {
    const d = device(id);
    if (!d) return id || "?";
    return state.lang === "zh" ? d.name_zh || d.name || d.id : d.name || d.id;
  }

  function sensorName(deviceId, sensorId, fallback) {
    const d = device(deviceId);
    const s = d && d.sensors.find((x) => x.id === sensorId);
    if (!s) return fallback || sensorId;
    return state.lang === "zh" ? s.label_zh || s.label : s.label || s.id;
  }

  // -- API ------------------------------------------------------------------

  async function api(path, options) {
    const opts = Object.assign({}, options || {});
    opts.headers = Object.assign({ Authorization: "Bearer " + state.token }, opts.headers || {});
    let response;
    try {
      response = await fetch(path, opts);
    } catch (err) {
      showError(t("network_error", { error: err.message }));
      throw err;
    }
    if (response.status === 401) {
      askForToken(true);
      throw new Error("unauthorized");
    }
    if (!response.ok) {
      let detail = response.statusText;
      try {
        const body = await response.json();
        detail = typeof body.detail === "string" ? body.detail : JSON.stringify(body.detail);
      } catch (_) { /* not JSON */ }
      showError(t("http_error", { status: response.status, detail }));
      throw new Error(detail);
    }
    return response;
  }

  function showError(text) {
    const banner = $("error-banner");
    banner.textContent = text;
    banner.hidden = !text;
  }

  // After a run only raise the banner: a run that fell back keeps it up even if the model answers again.
  async function checkReady(raiseOnly) {
    try {
      const response = await fetch("/readyz");
      const report = await response.json();
      if (raiseOnly && !report.degraded) return;
      setDegraded(Boolean(report.degraded), report.checks && report.checks.llm && report.checks.llm.breaker);
    } catch (_) { /* the next run will say */ }
  }

  // An open LLM circuit breaker says why the banner is up and when the model is tried again.
  function setDegraded(on, breaker) {
    $("degraded-banner").hidden = !on;
    const note = $("breaker-note");
    const open = Boolean(on && breaker && breaker.state !== "closed");
    note.hidden = !open;
    note.textContent = open ? t("breaker_text", { n: breaker.consecutive_failures, s: Math.ceil(breaker.retry_in_s) }) : "";
  }

  // -- token ----------------------------------------------------------------

  function tokenFromFragment() {
    const match = /(?:^|[#&])token=([^&]+)/.exec(location.hash);
    if (!match) return;
    state.token = decodeURIComponent(match[1]);
    localStorage.setItem("fixloop.token", state.token);
    // Keep the token out of the address bar, bookmarks and screenshots.
    history.replaceState(null, "", location.pathname + location.search);
  }

  function askForToken(invalid) {
    $("token-error").hidden = !invalid;
    $("token-input").value = "";
    const dialog = $("token-dialog");
    if (!dialog.open) dialog.showModal();
  }

  // -- loading --------------------------------------------------------------

  async function loadPlant() {
    const [devices, tools] = await Promise.all([api("/v1/devices").then((r) => r.json()), api("/v1/tools").then((r) => r.json())]);
    state.devices = devices;
    state.toolRoles = Object.fromEntries(tools.map((tool) => [tool.name, tool.role]));
    renderDevices();
  }

  function renderDevices() {
    const select = $("device");
    const current = select.value || localStorage.getItem("fixloop.device") || "";
    select.replaceChildren(el("option", { value: "", text: t("any_device") }),
      ...state.devices.map((d) => el("option", { value: d.id, text: `${deviceName(d.id)} (${d.id})` })));
    select.value = state.devices.some((d) => d.id === current) ? current : "";
  }

  async function loadSide() {
    const deviceId = $("device").value;
    const query = deviceId ? "?device_id=" + encodeURIComponent(deviceId) : "";
    const sep = query ? "&" : "?";
    const [orders, runs] = await Promise.all([
      api("/v1/work-orders" + query).then((r) => r.json()),
      api("/v1/runs" + query + sep + "limit=8").then((r) => r.json()),
    ]);
    $("orders").replaceChildren(...(orders.length ? orders.map(orderItem) : [el("li", { class: "muted", text: t("none") })]));
    $("history").replaceChildren(...(runs.length ? runs.map(historyItem) : [el("li", { class: "muted", text: t("none") })]));
  }

  function orderItem(order) {
    return el("li", { "data-testid": "order-item" },
      el("strong", { text: order.id }), " ",
      el("span", { class: "chip status-" + order.status, text: order.status }),
      el("div", { class: "muted", text: `${order.device_id} · ${order.fault_code} · ${t("priority", { priority: order.priority })}` }),
      el("div", { text: order.title }));
  }

  function historyItem(run) {
    const when = new Date(run.started_ms).toLocaleTimeString(state.lang === "zh" ? "zh-CN" : undefined);
    return el("li", { "data-testid": "history-item" },
      el("button", { type: "button", class: "link", onclick: () => showStoredRun(run.run_id), text: run.question }),
      el("div", { class: "muted" }, `${when} · ${run.device_id || "-"} · `,
        el("span", { class: "chip reason-" + run.reason, text: t("reason_" + run.reason) }),
        ` · ${t("steps_count", { n: run.steps })}`,
        run.work_order_id ? ` · ${run.work_order_id}` : ""));
  }

  // A stored run is replayed by the service as the events it streamed, and shown by the same handlers.
  async function showStoredRun(runId) {
    const path = "/v1/runs/" + encodeURIComponent(runId);
    const [view, events] = await Promise.all([api(path).then((r) => r.json()), api(path + "/events").then((r) => r.json())]);
    if (!view.record) return;
    const run = newRun(runId, view.record.question, view.record.device_id);
    run.running = false;
    for (const event of events) applyEvent(run, event);
    const last = view.confirmations[view.confirmations.length - 1];
    if (last && run.order) {
      run.order = Object.assign({}, run.order, { work_order_id: last.work_order_id, work_order_status: last.work_order_status });
    }
    state.run = run;
    renderRun();
  }

  // -- asking ---------------------------------------------------------------

  function newRun(runId, question, deviceId) {
    return { runId, question, deviceId, events: [], running: true, order: null, stored: false, takeover: null, error: null };
  }

  async function ask(question, deviceId) {
    if (state.run && state.run.running) return;
    showError("");
    state.lastAsk = { question, deviceId };
    state.run = newRun(null, question, deviceId);
    renderRun();
    const body = { question, device_id: deviceId || null };
    if (state.sessionId) body.session_id = state.sessionId;
    let response;
    try {
      response = await api("/v1/runs", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify(body),
      });
    } catch (err) {
      state.run.running = false;
      state.run.error = err.message;
      renderRun();
      return;
    }
    state.sessionId = response.headers.get("X-Session-ID") || state.sessionId;
    state.run.runId = response.headers.get("X-Run-ID");
    renderControls();
    await readStream(response, state.run);
    state.run.running = false;
    renderRun();
    loadSide().catch(() => {});
  }

  async function readStream(response, run) {
    // EventSource cannot POST or send headers: read the SSE stream with fetch() and a ReadableStream.
    const reader = response.body.getReader();
    const decoder = new TextDecoder();
    let buffer = "";
    for (;;) {
      let chunk;
      try {
        chunk = await reader.read();
      } catch (err) {
        run.error = t("network_error", { error: err.message });
        break;
      }
      if (chunk.done) break;
      buffer += decoder.decode(chunk.value, { stream: true });
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const data = block.split("\n").filter((line) => line.startsWith("data:")).map((line) => line.slice(5).trimStart()).join("\n");
        if (data) onEvent(run, JSON.parse(data));
      }
    }
  }

  // A live event also says what the service is like now: degraded, or a breaker this run opened.
  function onEvent(run, event) {
    if ((event.type === "run_started" && event.degraded) || event.type === "warning") setDegraded(true);
    if (event.type === "termination") checkReady(true);
    applyEvent(run, event);
    if (state.run === run) renderRun();
  }

  function applyEvent(run, event) {
    run.events.push(event);
    if (event.type === "observation") {
      const order = orderOf(event.observation);
      if (order) run.order = order;
    }
    if (event.type === "stored") {
      run.stored = true;
      if (event.work_order) run.order = event.work_order;
    }
    if (event.type === "error") run.error = t("run_failed", { error: event.error });
  }

  // Observation items carry their structured values under `fields`.
  function refs(observation) {
    return (observation.content || []).filter((i) => i.kind === "ref").map((i) => Object.assign({ text: i.text }, i.fields));
  }

  function orderOf(observation) {
    return refs(observation).find((f) => f.work_order_status !== undefined) || null;
  }

  async function takeOver() {
    const run = state.run;
    if (!run || !run.running || !run.runId) return;
    $("now-text").textContent = t("now_taking_over");
    const result = await (await api(`/v1/runs/${encodeURIComponent(run.runId)}/takeover`, { method: "POST" })).json();
    run.takeover = result;
    renderRun();
  }

  async function confirmOrder() {
    const run = state.run;
    const button = $("confirm");
    if (button) { button.disabled = true; button.textContent = t("confirming"); }
    try {
      const result = await (await api(`/v1/runs/${encodeURIComponent(run.runId)}/confirm`, { method: "POST" })).json();
      run.order = Object.assign({}, result.work_order, { confirmedHere: true });
    } catch (_) {
      if (button) { button.disabled = false; button.textContent = t("confirm"); }
      return;
    }
    renderRun();
    loadSide().catch(() => {});
  }

  // -- rendering --------------------------------------------------------------

  function renderRun() {
    renderControls();
    renderTimeline();
    renderAnswer();
  }

  function renderControls() {
    const run = state.run;
    const running = Boolean(run && run.running);
    $("ask").disabled = running;
    $("takeover").hidden = !running;
    $("takeover").disabled = !(run && run.runId);
    $("retry").hidden = running || !state.lastAsk;
    $("spinner").hidden = !running;
  }

  function renderTimeline() {
    const run = state.run;
    const list = $("timeline");
    if (!run) { list.replaceChildren(); $("now-text").textContent = t("idle"); return; }
    const items = [];
    let now = t("now_started");
    let lastAction = null;
    for (const event of run.events) {
      switch (event.type) {
        case "run_started":
          items.push(stepItem("started", t("step_started"), event.question));
          now = t("now_started");
          break;
        case "thought":
          items.push(stepItem("thought", t("step_thought"), event.text));
          now = t("now_thinking");
          break;
        case "action":
          lastAction = stepItem("action", describeAction(event, "step"), argsText(event.args));
          items.push(lastAction);
          now = describeAction(event, "now");
          break;
        case "observation": {
          const obs = event.observation;
          const summary = (obs.content || []).map((i) => i.text).filter(Boolean)[0] || "";
          const item = stepItem("observation", t("step_result"), summary.length > 160 ? summary.slice(0, 159) + "…" : summary);
          item.prepend(el("span", { class: "chip status-" + obs.status, text: t("status_" + obs.status) }));
          items.push(item);
          now = t("now_observed", { status: t("status_" + obs.status) });
          break;
        }
        case "format_error":
          items.push(stepItem("error", t("step_format_error"), event.error));
          break;
        case "warning":
          items.push(stepItem("warning", t("step_warning"), event.text));
          break;
        case "final_answer":
          items.push(stepItem("final", t("step_final"), ""));
          break;
        case "termination":
          now = event.termination.reason === "final_answer" ? t("now_answered") : t("now_stopped");
          break;
        default:
          break;
      }
    }
    if (run.error) now = run.error;
    list.replaceChildren(...items);
    $("now-text").textContent = now;
  }

  function stepItem(kind, title, detail) {
    return el("li", { class: "step step-" + kind, "data-testid": "step", "data-kind": kind },
      el("span", { class: "step-title", text: title }),
      detail ? el("span", { class: "step-detail", text: detail }) : null);
  }

  function describeAction(event, prefix) {
    const args = event.args || {};
    switch (state.toolRoles[event.tool]) {
      case "manual": return t(prefix + "_manual", { what: args.fault_code || args.query || "" });
      case "plc": return t(prefix + "_plc", { sensor: sensorName(args.device_id, args.sensor, args.sensor), device: deviceName(args.device_id) });
      case "order": return t(prefix + "_order", { device: deviceName(args.device_id), code: args.fault_code });
      default: return t(prefix + "_tool", { tool: event.tool });
    }
  }

  function argsText(args) {
    if (!args || typeof args !== "object") return "";
    return Object.entries(args).map(([k, v]) => `${k}=${typeof v === "string" ? v : JSON.stringify(v)}`).join(", ");
  }

  function renderAnswer() {
    const run = state.run;
    const panel = $("answer-panel");
    const final = run && run.events.filter((e) => e.type === "final_answer").pop();
    const termination = run && run.events.filter((e) => e.type === "termination").pop();
    const observations = run ? run.events.filter((e) => e.type === "observation").map((e) => e.observation) : [];
    panel.hidden = !(run && (final || observations.length || run.takeover));
    if (panel.hidden) return;
    $("answer").textContent = final ? final.text : "";
    const chips = [];
    if (termination) {
      const term = termination.termination;
      chips.push(el("span", { class: "chip reason-" + term.reason, "data-testid": "reason", text: t("reason_" + term.reason) }));
      chips.push(el("span", { class: "chip", text: t("confidence", { value: Number(term.confidence).toFixed(2) }) }));
    }
    $("termination").replaceChildren(...chips);
    $("evidence").replaceChildren(...evidenceCards(observations, run));
    renderTakeover(run, termination);
  }

  function evidenceCards(observations, run) {
    const cards = [];
    const seenManual = new Set();
    for (const obs of observations) {
      const steps = (obs.content || []).filter((i) => i.kind === "step");
      for (const item of refs(obs)) {
        if (item.work_order_status !== undefined) continue; // the order card below shows the latest state
        if (item.manual !== undefined && item.fault_code !== undefined) {
          const key = `${item.manual}|${item.page}|${item.fault_code}`;
          if (seenManual.has(key)) continue;
          seenManual.add(key);
          cards.push(manualCard(item, seenManual.size === 1 ? steps : []));
        } else if (item.sensor !== undefined) {
          cards.push(sensorCard(item));
        }
      }
    }
    if (run.order) cards.push(orderCard(run.order, run));
    return cards;
  }

  function manualCard(item, steps) {
    return el("article", { class: "card manual", "data-testid": "manual-card" },
      el("div", { class: "card-kind", text: t("manual_card") }),
      el("h4", { text: `${item.fault_code} — ${item.title}` }),
      el("div", { class: "muted", "data-testid": "manual-where",
        text: t("manual_where", { manual: item.manual, version: item.version, page: item.page }) }),
      steps.length ? el("ol", { class: "remedy" }, steps.map((s) => el("li", { text: s.text }))) : null);
  }

  function sensorCard(item) {
    const badges = [];
    if (item.value === null || item.value === undefined) {
      badges.push(el("span", { class: "chip status-error", text: t("no_value") }));
    } else if (item.source === "live") {
      badges.push(el("span", { class: "chip status-ok", "data-testid": "quality", text: t("live") }));
    } else {
      badges.push(el("span", { class: "chip status-degraded", "data-testid": "quality", text: t("from_cache", { age: age(item.age_s) }) }));
    }
    if (item.is_outlier) {
      const range = item.plausible_range || [];
      badges.push(el("span", { class: "chip status-error", text: t("outlier", { lo: range[0], hi: range[1], unit: item.unit || "" }) }));
    } else if (item.alarm) {
      badges.push(el("span", { class: "chip status-error", text: t("alarm_" + item.alarm) }));
    }
    const value = item.value === null || item.value === undefined ? "—" : `${item.value} ${item.unit || ""}`;
    return el("article", { class: "card sensor", "data-testid": "sensor-card" },
      el("div", { class: "card-kind", text: t("sensor_card") }),
      el("h4", { text: `${sensorName(item.device_id, item.sensor, item.label)} · ${deviceName(item.device_id)}` }),
      el("div", { class: "value", "data-testid": "sensor-value", text: value }),
      el("div", { class: "badges" }, badges, el("span", { class: "muted", text: t("age", { age: age(item.age_s) }) })),
      el("div", { class: "muted small", text: item.quality || "" }));
  }

  function orderCard(order, run) {
    const pending = order.work_order_status === "pending_confirmation";
    let note = null;
    if (order.confirmedHere) note = el("div", { class: "ok-text", text: t(order.created ? "confirmed" : "confirmed_existing", { id: order.work_order_id }) });
    return el("article", { class: "card order", "data-testid": "order-card" },
      el("div", { class: "card-kind", text: t("order_card") }),
      el("h4", { "data-testid": "order-id", text: order.work_order_id || `${order.device_id} / ${order.fault_code}` }),
      el("div", { text: order.title || "" }),
      el("div", { class: "badges" },
        el("span", { class: "chip " + (pending ? "status-degraded" : "status-ok"), "data-testid": "order-status",
          text: pending ? t("order_pending") : t("order_status", { status: order.work_order_status }) }),
        el("span", { class: "chip", text: t("priority", { priority: order.priority }) })),
      note,
      pending && run.stored && !run.running
        ? el("button", { type: "button", id: "confirm", class: "primary", "data-testid": "confirm", onclick: confirmOrder, text: t("confirm") })
        : null);
  }

  function renderTakeover(run, termination) {
    const panel = $("takeover-panel");
    const pending = run.takeover ? run.takeover.pending_action
      : termination && termination.termination.reason === "takeover" ? termination.termination.pending_action : undefined;
    panel.hidden = pending === undefined;
    if (panel.hidden) return;
    $("pending-action").replaceChildren(pending
      ? el("div", {}, el("strong", { text: describeAction({ tool: pending.tool, args: pending.args }, "step") }),
        el("div", { class: "muted", text: argsText(pending.args) }),
        pending.thought ? el("div", { text: pending.thought }) : null)
      : el("div", { class: "muted", text: t("no_pending") }));
  }

  // -- language ---------------------------------------------------------------

  function applyLang() {
    document.documentElement.lang = state.lang === "zh" ? "zh-CN" : "en";
    for (const node of document.querySelectorAll("[data-i18n]")) node.textContent = t(node.dataset.i18n);
    for (const node of document.querySelectorAll("[data-i18n-placeholder]")) node.placeholder = t(node.dataset.i18nPlaceholder);
    $("lang-switch").textContent = state.lang === "zh" ? "English" : "中文";
    renderDevices();
    if (state.run) renderRun();
    else $("now-text").textContent = t("idle");
  }

  // -- wiring -----------------------------------------------------------------

  function init() {
    tokenFromFragment();
    applyLang();
    $("lang-switch").addEventListener("click", () => {
      state.lang = state.lang === "zh" ? "en" : "zh";
      localStorage.setItem("fixloop.lang", state.lang);
      applyLang();
      loadSide().catch(() => {});
    });
    $("token-button").addEventListener("click", () => askForToken(false));
    $("token-form").addEventListener("submit", () => {
      state.token = $("token-input").value.trim();
      localStorage.setItem("fixloop.token", state.token);
      start();
    });
    $("ask-form").addEventListener("submit", (e) => {
      e.preventDefault();
      const question = $("question").value.trim();
      if (question) ask(question, $("device").value);
    });
    $("takeover").addEventListener("click", () => takeOver().catch(() => {}));
    $("retry").addEventListener("click", () => state.lastAsk && ask(state.lastAsk.question, state.lastAsk.deviceId));
    $("new-session").addEventListener("click", () => {
      state.sessionId = null;
      state.run = null;
      renderRun();
      $("answer-panel").hidden = true;
      $("question").value = "";
    });
    $("device").addEventListener("change", () => {
      localStorage.setItem("fixloop.device", $("device").value);
      state.sessionId = null;
      loadSide().catch(() => {});
    });
    checkReady();
    start();
  }

  function start() {
    if (!state.token) { askForToken(false); return; }
    showError("");
    loadPlant().then(loadSide).catch(() => {});
  }

  init();
})();
