// The answer as the service built it (edge/run/document.py), section by section in the document's order,
// each voice labelled by where it came from: the manual's page, the plant's lock-out, a live or cached
// reading judged against its limits, the plant's zero-energy rule, the language model's checked summary,
// a fix recorded on a closed order or a technician's unverified report. A record from before the document
// was stored shows its plain text. Every stored string goes in as text, never as markup.
"use strict";

(function () {
  // Modes in which the rules planner, not the model, assembled the answer.
  const DEGRADED = new Set(["no_model", "model_unavailable", "handed_over"]);
  // A verdict the technician must not read past.
  const FLAGGED = new Set(["past_high_alarm", "past_low_alarm", "suspect", "no_value"]);
  const SIGNALS = new Set(["danger", "warning", "caution"]);

  // ui: {el, t, lang} as the app draws add-ons; names: {device(id), age(seconds)} in the drawing's language.
  function render(doc, ui, names) {
    const { el, t } = ui;
    // The document's words are in the question's language, the labels in the one the run is shown in.
    const said = (tag, attrs, text) => el(tag, Object.assign({ lang: doc.language !== ui.lang ? langTag(doc.language) : null, text }, attrs));
    const where = (cited) => t("manual_where", { manual: cited.manual, version: cited.version, page: cited.page });
    const source = (text) => el("span", { class: "doc-source", "data-testid": "source", text });
    const nodes = [];

    if (doc.mode && doc.mode !== "model") {
      nodes.push(el("div", { class: "doc-mode" + (DEGRADED.has(doc.mode) ? " degraded" : ""), "data-testid": "answer-mode", "data-mode": doc.mode },
        el("strong", { text: t(DEGRADED.has(doc.mode) ? "degraded_mode" : "rules_first") }), " ",
        el("span", { text: t("mode_" + doc.mode, { why: doc.mode_reason || t("mode_why_unknown") }) })));
    }
    for (const notice of doc.notices || []) nodes.push(said("div", { class: "doc-notice", "data-testid": "answer-notice" }, notice));

    for (const statement of doc.safety || []) {
      const word = SIGNALS.has(statement.signal_word) ? statement.signal_word : "warning";
      nodes.push(el("div", { class: "doc-safety signal-" + word, "data-testid": "answer-safety", "data-signal": word },
        el("div", { class: "doc-head" },
          el("strong", { class: "signal", text: t("signal_" + word) }),
          source(t("src_manual", { where: where(statement.cited) }))),
        el("blockquote", { text: statement.text })));
    }
    for (const judgement of doc.judgements || []) {
      const safe = judgement.safe === true ? "safe" : judgement.safe === false ? "unsafe" : "unknown";
      nodes.push(el("div", { class: "doc-judgement " + safe, "data-testid": "answer-judgement", "data-safe": safe, role: "alert" },
        el("div", { class: "doc-head" },
          el("strong", { text: t("judgement_title") }),
          source(t("src_zero_energy", { reading: readingSource(judgement.cited, t) }))),
        said("div", { class: "doc-judgement-text" }, judgement.text)));
    }
    if (doc.prose && (doc.prose.sentences || []).length) {
      nodes.push(el("section", { class: "doc-prose", "data-testid": "answer-prose", "data-source": doc.prose.source },
        el("div", { class: "doc-label", text: t(doc.prose.source === "model" ? "prose_model" : "prose_rules") }),
        said("p", {}, doc.prose.sentences.join(" "))));
    }

    // The plant's isolation comes before the first steps a technician could start on (edge/run/render.py).
    const isolation = () => (doc.isolation || []).length ? isolationSection(doc.isolation, ui, names) : null;
    let isolationShown = false;
    for (const entry of doc.entries || []) {
      nodes.push(entrySection(entry, ui, said, where, source));
      if ((entry.steps || []).length) {
        if (!isolationShown) nodes.push(isolation());
        isolationShown = true;
        nodes.push(el("section", { class: "doc-steps", "data-testid": "answer-steps" },
          el("div", { class: "doc-head" }, el("strong", { text: t("doc_steps") }), source(t("src_manual", { where: where(entry.cited) }))),
          el("ol", {}, entry.steps.map((step) => el("li", { text: step })))));
      }
    }
    if (!isolationShown) nodes.push(isolation());

    for (const reading of doc.readings || []) nodes.push(readingRow(reading, ui, said, names));
    for (const order of doc.work_orders || []) {
      const key = { proposed: "doc_order_proposed", created: "doc_order_created", existing: "doc_order_existing" }[order.kind];
      nodes.push(el("div", { class: "doc-order", "data-testid": "answer-order" },
        t(key, { id: order.id, device: names.device(order.device_id), code: order.code, priority: order.priority, status: order.status })));
    }
    for (const fix of doc.past_fixes || []) nodes.push(fixRow(fix, ui, said, names));
    for (const text of doc.other || []) nodes.push(said("div", { class: "doc-other", "data-testid": "answer-other" }, text));
    for (const text of doc.notes || []) nodes.push(said("div", { class: "doc-note", "data-testid": "answer-note" }, text));
    if ((doc.missing || []).length) {
      nodes.push(el("div", { class: "doc-missing", "data-testid": "answer-missing" },
        el("strong", { text: t("doc_missing") }), " ", said("span", {}, doc.missing.join(t("list_sep")))));
    }
    return nodes.filter(Boolean);
  }

  function langTag(language) {
    return language === "zh" ? "zh-CN" : "en";
  }

  function readingSource(cited, t) {
    return t(cited && cited.source === "cached_reading" ? "src_cached" : "src_live");
  }

  function entrySection(entry, ui, said, where, source) {
    const { el, t } = ui;
    const details = [t("src_manual", { where: where(entry.cited) })];
    if (entry.ocr) details.push(t("doc_ocr"));
    if (entry.scope) details.push(t("doc_scope", { scope: entry.scope }));
    const causes = entry.causes || [];
    return el("section", { class: "doc-entry", "data-testid": "answer-entry" },
      el("h4", { text: entry.kind === "page" ? t("doc_page") : entry.code ? `${entry.code} — ${entry.title}` : entry.title }),
      source(details.join(" · ")),
      entry.applies_to_device === false ? el("div", { class: "doc-flag", "data-testid": "other-machine", text: t("doc_other_machine") }) : null,
      entry.kind === "page" && entry.snippet ? el("blockquote", { text: entry.snippet }) : null,
      causes.length ? el("div", { class: "doc-label", text: t(entry.causes_by_evidence ? "doc_causes_evidence" : "doc_causes_manual") }) : null,
      causes.length ? el("ol", { class: "doc-causes" }, causes.map((cause) => el("li", {},
        el("span", { text: cause.text }),
        (cause.evidence || []).length ? said("div", { class: "muted small" }, cause.evidence.join(t("list_sep"))) : null))) : null);
  }

  function isolationSection(steps, ui, names) {
    const { el, t } = ui;
    const first = steps[0];
    const sources = (first.energy_sources || []).map((s) => t("energy_" + s)).join(t("list_sep"));
    return el("section", { class: "doc-isolation", "data-testid": "answer-isolation" },
      el("div", { class: "doc-head" },
        el("strong", { text: t("doc_isolation", { device: names.device(first.device_id), sources }) }),
        el("span", { class: "doc-source", "data-testid": "source", text: t("src_plant") })),
      el("ol", {}, steps.map((step) => el("li", { value: step.n, text: step.text }))));
  }

  function readingRow(reading, ui, said, names) {
    const { el, t } = ui;
    const flagged = FLAGGED.has(reading.verdict);
    const value = reading.value === null || reading.value === undefined ? "—" : `${reading.value} ${reading.unit || ""}`.trim();
    const cached = reading.cited && reading.cited.source === "cached_reading";
    const limits = [];
    if (reading.alarm_low !== null && reading.alarm_low !== undefined) limits.push(t("doc_limit_low", { value: reading.alarm_low, unit: reading.unit || "" }));
    if (reading.alarm_high !== null && reading.alarm_high !== undefined) limits.push(t("doc_limit_high", { value: reading.alarm_high, unit: reading.unit || "" }));
    return el("div", { class: "doc-reading" + (flagged ? " flagged" : ""), "data-testid": "answer-reading", "data-verdict": reading.verdict, "data-flagged": String(flagged) },
      el("div", { class: "doc-head" },
        said("strong", {}, `${reading.label}: `),
        el("span", { class: "doc-value", "data-testid": "reading-value", text: value }),
        el("span", { class: "chip " + (cached ? "status-degraded" : "status-ok"), "data-testid": "reading-source",
          text: cached ? t("from_cache", { age: names.age(reading.age_s) }) : t("live") })),
      el("div", { class: "doc-verdict" },
        flagged ? el("span", { class: "flag", "aria-hidden": "true", text: "⚠" }) : null,
        said("span", { class: "chip " + (flagged ? "status-error" : "status-ok"), "data-testid": "verdict" }, reading.verdict_text)),
      el("div", { class: "muted small", "data-testid": "limits", text: limits.length ? t("doc_limits", { limits: limits.join(t("list_sep")) }) : t("doc_no_limits") }),
      reading.quality ? el("div", { class: "muted small", "data-testid": "signal-quality", text: t("signal_quality", { quality: reading.quality }) }) : null,
      reading.trend ? said("div", { class: "muted small" }, reading.trend) : null);
  }

  // A fix recorded when an order was closed, or a technician's report nobody allowed to close orders confirmed.
  function fixRow(fix, ui, said, names) {
    const { el, t } = ui;
    const unverified = fix.cited && fix.cited.source === "unverified_report";
    const heading = unverified
      ? t(fix.reported_by ? "fix_unverified_by" : "fix_unverified", { by: fix.reported_by, date: fix.date })
      : t(fix.same_device === false ? "fix_recorded_model" : "fix_recorded_here", { id: fix.id, device: names.device(fix.device_id), date: fix.date });
    const lines = [["fix_cause", fix.cause], ["fix_remedy", fix.remedy], ["fix_parts", (fix.parts || []).join(", ")]].filter(([, text]) => text);
    return el("div", { class: "doc-fix fix" + (unverified ? " unverified" : ""), "data-testid": "past-fix", "data-source": unverified ? "unverified_report" : "recorded_fix" },
      el("div", {},
        el("span", { class: "chip " + (unverified ? "status-degraded" : "status-ok"), text: t(unverified ? "fix_unverified_chip" : "fix_recorded_chip") }), " ",
        el("strong", { "data-testid": "fix-heading", text: heading })),
      lines.length ? el("ul", { class: "fix-lines" }, lines.map(([key, text]) => el("li", {}, t(key, { text: "" }), said("span", {}, text))))
        : el("div", { class: "muted", text: t("fix_unrecorded") }));
  }

  window.FixloopAnswer = { render, DEGRADED };
})();
