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
    reconnecting: false, // a run's stream dropped and is being picked up again
    // What the degraded banner says: the mode and why from the latest run the rules planner answered,
    // else the service's readiness (degraded, maybe a breaker open), which knows no more than that.
    banner: { on: false, mode: null, why: null, whyLang: null, breaker: null },
  };
  const Connection = window.FixloopConnection;

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
      setDegraded(Boolean(report.degraded), { breaker: (report.checks && report.checks.llm && report.checks.llm.breaker) || null });
    } catch (_) { /* the next run will say */ }
  }

  // `what`: the fields of state.banner to change; a run's answer brings its mode and why.
  function setDegraded(on, what) {
    Object.assign(state.banner, what || {}, { on });
    renderBanner();
  }

  // An open LLM circuit breaker says why the banner is up and when the model is tried again.
  function renderBanner() {
    const banner = state.banner;
    $("degraded-banner").hidden = !banner.on;
    $("degraded-title").textContent = t(banner.mode ? "banner_" + banner.mode : "degraded_title");
    const why = $("degraded-why");
    why.hidden = !banner.why;
    why.textContent = banner.why ? t("banner_why", { why: banner.why }) : "";
    why.lang = banner.whyLang === "zh" ? "zh-CN" : "en";
    const note = $("breaker-note");
    const breaker = banner.breaker;
    const open = Boolean(banner.on && breaker && breaker.state !== "closed");
    note.hidden = !open;
    note.textContent = open ? t("breaker_text", { n: breaker.consecutive_failures, s: Math.ceil(breaker.retry_in_s) }) : "";
  }

  // The answer document of a run's termination (null for records from before it was stored).
  function answerOf(run) {
    const termination = run && run.events.filter((e) => e.type === "termination").pop();
    return (termination && termination.termination.answer) || null;
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
      el("div", { text: order.title }),
      window.FixloopOrderClose.control({ order, place: "list", token: state.token, ui: addOnUi(), onClosed: orderClosed,
        isolation: (device(order.device_id) || {}).isolation }));
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
    events.forEach((event, n) => applyEvent(run, event, n));
    Connection.shownRun.set({ runId, question: run.question, deviceId: run.deviceId, sessionId: state.sessionId });
    window.FixloopFeedback.seed(runId, view.feedback || []);
    const last = view.confirmations[view.confirmations.length - 1];
    if (last && run.order) {
      run.order = Object.assign({}, run.order, { work_order_id: last.work_order_id, work_order_status: last.work_order_status });
    }
    state.run = run;
    renderRun();
  }

  // -- asking ---------------------------------------------------------------

  function newRun(runId, question, deviceId) {
    // lastId: the number of the last event applied (-1: none), what a resumed stream starts after.
    return { runId, question, deviceId, events: [], lastId: -1, running: true, order: null, stored: false, takeover: null, error: null };
  }

  // Every question goes through the outbox: one asked offline, or while the service is out of reach,
  // waits there (shown as queued) and is sent in its turn.
  function submit(question, deviceId) {
    Connection.outbox.add(question, deviceId);
    renderQueue();
    sendQueued();
  }

  let sending = false;
  let sendRetry = null;
  let sendAttempt = 0;

  // One run at a time, oldest question first; called again when a run ends, the browser comes back online
  // or a token is entered.
  async function sendQueued() {
    clearTimeout(sendRetry);
    if (sending) return;
    sending = true;
    try {
      for (let next; (next = Connection.outbox.list()[0]);) {
        if (!navigator.onLine || (state.run && state.run.running)) return;
        const outcome = await ask(next);
        if (outcome === "unreachable") sendRetry = setTimeout(sendQueued, Connection.retryDelay(sendAttempt++));
        if (outcome !== "sent") return;
        sendAttempt = 0;
      }
    } finally {
      sending = false;
    }
  }

  // "sent" once the service has the question (or refused it: the error shows, it leaves the outbox);
  // "unreachable" or "unauthorized" leave it queued and the run on screen as it was.
  async function ask(item) {
    const { question, deviceId } = item;
    showError("");
    state.lastAsk = { question, deviceId };
    const shown = state.run;
    const run = newRun(null, question, deviceId);
    state.run = run;
    renderRun();
    const body = { question, device_id: deviceId || null, client_request_id: item.id };
    if (state.sessionId) body.session_id = state.sessionId;
    let response;
    try {
      response = await api("/v1/runs", {
        method: "POST",
        headers: { "Content-Type": "application/json", Accept: "text/event-stream" },
        body: JSON.stringify(body),
      });
    } catch (err) {
      const kept = err instanceof TypeError ? "unreachable" : err.message === "unauthorized" ? "unauthorized" : null;
      if (kept) {
        if (state.run === run) { state.run = shown; renderRun(); }
        return kept;
      }
      Connection.outbox.remove(item.id);
      renderQueue();
      run.running = false;
      run.error = err.message;
      renderRun();
      return "sent";
    }
    Connection.outbox.remove(item.id);
    renderQueue();
    state.sessionId = response.headers.get("X-Session-ID") || state.sessionId;
    run.runId = response.headers.get("X-Run-ID");
    Connection.shownRun.set({ runId: run.runId, question, deviceId, sessionId: state.sessionId });
    renderControls();
    followRun(run, response);
    return "sent";
  }

  // The run's events until its last, picked up after the last one received whenever the stream drops
  // (EventSource cannot send the token, so fetch() reads the stream); `response` is an open stream to read first.
  async function followRun(run, response) {
    const path = `/v1/runs/${encodeURIComponent(run.runId)}/stream`;
    try {
      await Connection.follow({
        response,
        open: (lastId, signal) => window.FixloopRequest.request(path, state.token, { headers: lastId >= 0 ? { "Last-Event-ID": String(lastId) } : {}, signal }),
        onEvent: (n, event) => onEvent(run, event, n),
        lastId: () => run.lastId,
        over: () => !run.running,
        wanted: () => state.run === run,
        status: (status) => { state.reconnecting = status === "reconnecting"; renderConnection(); },
      });
    } catch (err) {
      if (!(err instanceof window.FixloopRequest.RequestError)) throw err;
      if (err.status === 401) askForToken(true);
      run.error = err.status === 404 ? t("run_lost") : t("http_error", { status: err.status, detail: err.message });
    }
    run.running = false;
    if (state.run === run) renderRun();
    loadSide().catch(() => {});
    sendQueued();
  }

  // After a reload: the run that was on screen, followed to its end if it is still going.
  async function restoreRun() {
    const saved = Connection.shownRun.get();
    if (!saved || state.run) return;
    state.sessionId = saved.sessionId || null;
    let view;
    try {
      view = await (await api("/v1/runs/" + encodeURIComponent(saved.runId))).json();
    } catch (err) {
      if (!(err instanceof TypeError)) Connection.shownRun.clear(); // the service no longer has it
      return;
    }
    if (!view.running) {
      await showStoredRun(saved.runId);
      return;
    }
    state.run = newRun(saved.runId, saved.question, saved.deviceId);
    renderRun();
    followRun(state.run, null);
  }

  function renderQueue() {
    const items = Connection.outbox.list();
    $("queue").hidden = !items.length;
    $("queue").replaceChildren(...items.map((item) => el("li", { "data-testid": "queued-item" },
      el("span", { class: "chip status-degraded", "data-testid": "queued-chip", text: t("queued") }), " ",
      el("span", { "data-testid": "queued-question", text: item.question }),
      el("div", { class: "muted" }, item.deviceId ? deviceName(item.deviceId) : t("any_device"), " · ",
        t("queued_note", { time: new Date(item.queuedMs).toLocaleTimeString(state.lang === "zh" ? "zh-CN" : undefined) })),
      el("button", { type: "button", class: "ghost", "data-testid": "cancel-queued", text: t("cancel_queued"),
        onclick: () => { Connection.outbox.remove(item.id); renderQueue(); } }))));
  }

  function renderConnection() {
    const status = !navigator.onLine ? "offline" : state.reconnecting ? "reconnecting" : null;
    const node = $("link-status");
    node.hidden = !status;
    node.replaceChildren(status ? el("span", { class: "chip status-degraded", text: t("link_" + status) }) : "");
  }

  // A live event also says what the service is like now: degraded, or a breaker this run opened.
  function onEvent(run, event, n) {
    if (!applyEvent(run, event, n)) return;
    if ((event.type === "run_started" && event.degraded) || event.type === "warning") setDegraded(true);
    if (event.type === "termination") {
      const doc = answerOf(run);
      if (doc && window.FixloopAnswer.DEGRADED.has(doc.mode)) setDegraded(true, { mode: doc.mode, why: doc.mode_reason, whyLang: doc.language });
      checkReady(true);
    }
    if (state.run === run) renderRun();
  }

  // Events are numbered in their run: one already applied (a resumed stream overlapping what came
  // before) is skipped, so nothing shows twice. Returns whether it was new.
  function applyEvent(run, event, n) {
    if (n <= run.lastId) return false;
    run.lastId = n;
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
    // `stored` and `error` are a run's last events: it is complete as soon as one is shown.
    if (event.type === "stored" || event.type === "error") run.running = false;
    return true;
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

  // Labels follow the run: the language picked for it with the switch, else Chinese for a Chinese
  // question (the service answers it in Chinese: edge/run/answer.py language_of), else the UI's.
  function runLang(run) {
    if (!run) return state.lang;
    return run.lang || (window.FixloopI18n.languageOf(run.question) === "zh" ? "zh" : state.lang);
  }

  // Drawing is synchronous: t(), deviceName() and sensorName() speak `lang` until `draw` returns.
  function inLang(lang, draw) {
    const ui = state.lang;
    state.lang = lang;
    try {
      return draw();
    } finally {
      state.lang = ui;
    }
  }

  // The page viewer, sparkline and close form word their text, later too, in the language they were drawn in.
  function addOnUi() {
    const lang = state.lang;
    return { el, lang, t: (key, vars) => inLang(lang, () => t(key, vars)) };
  }

  // Marked up in its language too: Chinese text in an English page would be set with Japanese glyph forms.
  function markLang(lang, ...ids) {
    for (const id of ids) $(id).lang = lang === "zh" ? "zh-CN" : "en";
  }

  function renderTimeline() {
    const lang = runLang(state.run);
    markLang(lang, "timeline", "now-text");
    inLang(lang, drawTimeline);
  }

  function drawTimeline() {
    const run = state.run;
    const list = $("timeline");
    if (!run) { list.replaceChildren(); $("now-text").textContent = t("idle"); return; }
    const items = [];
    let now = t("now_started");
    let tool = null; // the tool whose result comes next
    for (const event of run.events) {
      switch (event.type) {
        case "run_started":
          items.push(stepItem("started", t("step_started"), event.question));
          now = t("now_started");
          break;
        case "thought":
          items.push(byPlanner(stepItem("thought", t("step_thought"), event.text), event.planner));
          now = t("now_thinking");
          break;
        case "action":
          tool = event.tool;
          items.push(byPlanner(stepItem("action", describeAction(event, "step"), argsText(event.args)), event.planner));
          now = describeAction(event, "now");
          break;
        case "observation": {
          const obs = event.observation;
          const summary = resultSummary(obs, tool);
          const item = stepItem("observation", t("step_result"), summary.length > 160 ? summary.slice(0, 159) + "…" : summary);
          item.prepend(el("span", { class: "chip status-" + obs.status, text: t("status_" + obs.status) }));
          items.push(item);
          now = t("now_observed", { status: t("status_" + obs.status) });
          break;
        }
        case "format_error":
          items.push(byPlanner(stepItem("error", t("step_format_error"), event.error), event.planner));
          break;
        case "warning":
          items.push(stepItem("warning", t("step_warning"), event.text));
          break;
        case "answer_rejected":
          items.push(stepItem("warning", t("step_rejected"), event.problems.join("; ")));
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

  // Which planner took the step: the language model, or the rules planner (degraded mode or a hand-over).
  function byPlanner(item, planner) {
    if (planner) item.prepend(el("span", { class: "chip planner-" + planner, "data-testid": "planner", text: t("planner_" + planner) }));
    return item;
  }

  function stepItem(kind, title, detail) {
    return el("li", { class: "step step-" + kind, "data-testid": "step", "data-kind": kind },
      el("span", { class: "step-title", text: title }),
      detail ? el("span", { class: "step-detail", text: detail }) : null);
  }

  // A tool's result in the run's language from its fields; the tool's own (English) sentence otherwise.
  function resultSummary(obs, tool) {
    const found = refs(obs);
    const fixes = found.filter((f) => f.past_work_order_id !== undefined).length;
    let summary = null;
    if (obs.status === "ok" || obs.status === "degraded") {
      const entry = found.find((f) => f.kind === "entry" && f.fault_code);
      const reading = found.find((f) => f.sensor !== undefined && f.value !== null && f.value !== undefined);
      const order = orderOf(obs);
      switch (state.toolRoles[tool]) {
        case "manual":
          if (entry) summary = t("obs_manual", { code: entry.fault_code, title: entry.title,
            where: t("manual_where", { manual: entry.manual, version: entry.version, page: entry.page }) });
          break;
        case "plc":
          if (reading) summary = t("obs_reading", { sensor: sensorName(reading.device_id, reading.sensor, reading.label),
            value: reading.value, unit: reading.unit || "", source: reading.source === "live" ? t("live") : t("from_cache", { age: age(reading.age_s) }) });
          break;
        case "order":
          if (order) {
            summary = order.work_order_status === "pending_confirmation"
              ? t("obs_order_pending", { device: deviceName(order.device_id), code: order.fault_code })
              : t(order.created ? "obs_order_created" : "obs_order_existing", { id: order.work_order_id, status: order.work_order_status });
            if (fixes) summary += " · " + t("obs_fixes", { n: fixes });
          }
          break;
        default:
          break;
      }
    }
    summary = summary || (obs.content || []).map((i) => i.text).filter(Boolean)[0] || "";
    return summary.length > 160 ? summary.slice(0, 159) + "…" : summary;
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
    const lang = runLang(state.run);
    markLang(lang, "termination", "answer", "evidence", "pending-action");
    inLang(lang, drawAnswer);
  }

  function drawAnswer() {
    const run = state.run;
    const panel = $("answer-panel");
    const final = run && run.events.filter((e) => e.type === "final_answer").pop();
    const termination = run && run.events.filter((e) => e.type === "termination").pop();
    const observations = run ? run.events.filter((e) => e.type === "observation").map((e) => e.observation) : [];
    panel.hidden = !(run && (final || observations.length || run.takeover));
    if (panel.hidden) return;
    const doc = answerOf(run);
    $("answer").replaceChildren(...(doc
      ? window.FixloopAnswer.render(doc, addOnUi(), { device: deviceName, age })
      : [el("div", { class: "answer-text", text: final ? final.text : "" })]));
    const chips = [];
    if (termination) {
      const term = termination.termination;
      chips.push(el("span", { class: "chip reason-" + term.reason, "data-testid": "reason", text: t("reason_" + term.reason) }));
      chips.push(el("span", { class: "chip", text: t("confidence", { value: Number(term.confidence).toFixed(2) }) }));
    }
    $("termination").replaceChildren(...chips);
    $("evidence").replaceChildren(...evidenceCards(observations, run));
    $("feedback-slot").replaceChildren(...(run.stored && run.runId
      ? [window.FixloopFeedback.control({ runId: run.runId, token: state.token, ui: addOnUi(), flush: flushWrites })] : []));
    renderTakeover(run, termination);
  }

  let flushRetry = null;
  let flushAttempt = 0;

  // The tablet's queued writes (feedback), in order, whenever it may be online; retried while the
  // service is out of reach.
  async function flushWrites() {
    clearTimeout(flushRetry);
    if (!navigator.onLine || !state.token) return;
    const settle = (item, err) => { window.FixloopFeedback.settle(item, err); window.FixloopChecklist.settle(item, err); };
    await Connection.flushWrites(state.token, (item) => settle(item), settle);
    if (Connection.writes.list().length) flushRetry = setTimeout(flushWrites, Connection.retryDelay(flushAttempt++));
    else flushAttempt = 0;
  }

  function evidenceCards(observations, run) {
    const cards = [];
    const seenManual = new Set();
    for (const obs of observations) {
      for (const item of refs(obs)) {
        if (item.work_order_status !== undefined) continue; // the order card below shows the latest state
        if (item.manual !== undefined && item.fault_code !== undefined) {
          const key = `${item.manual}|${item.page}|${item.fault_code}`;
          if (seenManual.has(key)) continue;
          seenManual.add(key);
          cards.push(manualCard(item));
        } else if (item.sensor !== undefined) {
          cards.push(sensorCard(item));
        }
      }
    }
    if (run.order) cards.push(orderCard(run.order, run));
    return cards;
  }

  // The page a run cited; its steps are in the answer, after the plant's isolation.
  function manualCard(item) {
    const where = t("manual_where", { manual: item.manual, version: item.version, page: item.page });
    return el("article", { class: "card manual", "data-testid": "manual-card" },
      el("div", { class: "card-kind", text: t("manual_card") }),
      el("h4", { text: `${item.fault_code} — ${item.title}` }),
      el("div", { class: "muted", "data-testid": "manual-where", text: where }),
      item.manual_id && item.page ? pageButton(item, where) : null);
  }

  // The page as cited, the entry highlighted on it (`?entry=` for an entry hit, not for a page-text hit).
  function pageButton(item, where) {
    const entry = item.kind === "entry" && item.fault_code ? "?entry=" + encodeURIComponent(item.fault_code) : "";
    const url = `/v1/manuals/${encodeURIComponent(item.manual_id)}/pages/${encodeURIComponent(item.page)}.png${entry}`;
    const ui = addOnUi();
    const alt = t("viewer_alt", { manual: item.manual, page: item.page });
    return el("button", { type: "button", class: "secondary", "data-testid": "open-page", text: t("open_page", { page: item.page }),
      onclick: () => window.FixloopPageViewer.open({ url, token: state.token, title: where, alt, ui }) });
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
      item.quality ? el("div", { class: "muted small", "data-testid": "signal-quality", text: t("signal_quality", { quality: item.quality }) }) : null,
      window.FixloopSparkline.element({ deviceId: item.device_id, sensor: item.sensor, key: `${item.device_id}|${item.sensor}|${item.ts_ms}`,
        label: sensorName(item.device_id, item.sensor, item.label), token: state.token, ui: addOnUi() }));
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
        : null,
      order.work_order_id && !pending
        ? window.FixloopChecklist.control({ order: { id: order.work_order_id, device_id: order.device_id },
          observations: run.events.filter((e) => e.type === "observation").map((e) => e.observation),
          token: state.token, ui: addOnUi(), flush: flushWrites })
        : null,
      order.work_order_id && !pending
        ? window.FixloopOrderClose.control({ order: { id: order.work_order_id, status: order.work_order_status, device_id: order.device_id },
          place: "card", token: state.token, ui: addOnUi(), onClosed: orderClosed, isolation: (device(order.device_id) || {}).isolation })
        : null);
  }

  // From the card or the side list: the order shown for the run takes its new status, the list drops it.
  function orderClosed(order) {
    const run = state.run;
    if (run && run.order && run.order.work_order_id === order.id) {
      run.order = Object.assign({}, run.order, { work_order_status: order.status });
      renderRun();
    }
    loadSide().catch(() => {});
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
    renderBanner();
    if (state.run) {
      state.run.lang = state.lang; // picked by the technician: it wins over the question's language
      renderRun();
    } else $("now-text").textContent = t("idle");
  }

  // -- wiring -----------------------------------------------------------------

  function init() {
    tokenFromFragment();
    applyLang();
    $("lang-switch").addEventListener("click", () => {
      state.lang = state.lang === "zh" ? "en" : "zh";
      localStorage.setItem("fixloop.lang", state.lang);
      applyLang();
      renderQueue();
      renderConnection();
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
      if (question) submit(question, $("device").value);
    });
    $("takeover").addEventListener("click", () => takeOver().catch(() => {}));
    $("retry").addEventListener("click", () => state.lastAsk && submit(state.lastAsk.question, state.lastAsk.deviceId));
    $("new-session").addEventListener("click", () => {
      state.sessionId = null;
      state.run = null;
      Connection.shownRun.clear();
      renderRun();
      $("answer-panel").hidden = true;
      $("question").value = "";
    });
    $("device").addEventListener("change", () => {
      localStorage.setItem("fixloop.device", $("device").value);
      state.sessionId = null;
      loadSide().catch(() => {});
    });
    window.addEventListener("offline", renderConnection);
    window.addEventListener("online", () => { renderConnection(); sendQueued(); flushWrites(); });
    renderConnection();
    renderQueue();
    checkReady();
    start();
  }

  function start() {
    if (!state.token) { askForToken(false); return; }
    showError("");
    loadPlant().then(() => {
      renderQueue(); // with the machines' names
      loadSide().catch(() => {});
      return restoreRun();
    }).then(() => { flushWrites(); return sendQueued(); }).catch(() => {});
  }

  init();
})();
