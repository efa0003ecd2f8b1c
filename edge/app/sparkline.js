// A sensor's last hour on its card: an inline SVG line with the alarm limits as dashed lines over a
// tinted band, and the trend in words. Cards are redrawn on every run event, so each history is
// fetched once per reading and kept here; a box drawn before it arrives is filled in when it does.
"use strict";

(function () {
  const WINDOW_S = 3600;
  const WIDTH = 300; // viewBox units; the SVG stretches to the card, strokes keep their width
  const HEIGHT = 64;
  const PAD = 0.08; // of the value range, above and below
  const KEPT = 24; // histories kept: a session's sensor cards, not every reading ever shown
  const SVG = "http://www.w3.org/2000/svg";

  const histories = new Map(); // key -> {history} | {promise}

  function svg(tag, attrs) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attrs)) node.setAttribute(name, value);
    return node;
  }

  function number(value) {
    return Number.isInteger(value) ? String(value) : value.toFixed(Math.abs(value) >= 100 ? 0 : 1);
  }

  function fetchHistory(key, deviceId, sensor, token) {
    const path = `/v1/devices/${encodeURIComponent(deviceId)}/sensors/${encodeURIComponent(sensor)}/history?window_s=${WINDOW_S}`;
    const promise = window.FixloopRequest.request(path, token).then((response) => response.json());
    histories.set(key, { promise });
    promise.then((history) => {
      histories.set(key, { history });
      while (histories.size > KEPT) histories.delete(histories.keys().next().value);
    }, () => histories.delete(key)); // not kept: the next redraw asks again (the network may be back)
    return promise;
  }

  // key: one reading (device, sensor, its time); label: the sensor's name in the card's language.
  function element({ deviceId, sensor, label, key, token, ui }) {
    const box = ui.el("div", { class: "spark", "data-testid": "sparkline-box" });
    const known = histories.get(key);
    if (known && known.history) {
      draw(box, known.history, label, ui);
      return box;
    }
    box.append(ui.el("div", { class: "muted small", text: ui.t("spark_loading") }));
    (known ? known.promise : fetchHistory(key, deviceId, sensor, token)).then(
      (history) => draw(box, history, label, ui),
      (err) => box.replaceChildren(ui.el("div", { class: "muted small", "data-testid": "spark-error", text: ui.t("spark_error", { detail: err.message }) })));
    return box;
  }

  function trendText(trend, unit, t) {
    const direction = (trend && trend.direction) || "unknown";
    const slope = trend && typeof trend.slope_per_min === "number" ? Math.abs(trend.slope_per_min) : 0;
    return t("trend_" + direction, { slope: slope >= 1 ? slope.toFixed(1) : slope.toPrecision(2), unit });
  }

  function draw(box, history, label, { el, t }) {
    const unit = history.unit || "";
    const points = history.points || [];
    const trend = el("span", { class: "chip trend trend-" + ((history.trend && history.trend.direction) || "unknown"),
      "data-testid": "trend", text: trendText(history.trend, unit, t) });
    if (!points.length) {
      box.replaceChildren(el("div", { class: "spark-caption" }, trend,
        el("span", { class: "muted small", "data-testid": "spark-empty", text: t("spark_empty") })));
      return;
    }
    const values = points.map((p) => p[1]);
    const limits = [history.alarm_low, history.alarm_high].filter((v) => typeof v === "number");
    let lo = Math.min(...values, ...limits);
    let hi = Math.max(...values, ...limits);
    if (hi === lo) { lo -= 1; hi += 1; }
    const pad = (hi - lo) * PAD;
    lo -= pad;
    hi += pad;
    const since = history.since_ms;
    const span = Math.max(1, history.until_ms - since);
    const x = (ts) => (((ts - since) / span) * WIDTH).toFixed(1);
    const y = (v) => (HEIGHT - ((v - lo) / (hi - lo)) * HEIGHT).toFixed(1);

    const chart = svg("svg", { class: "spark-chart", viewBox: `0 0 ${WIDTH} ${HEIGHT}`, preserveAspectRatio: "none",
      role: "img", "data-testid": "sparkline", "data-points": String(points.length),
      "aria-label": t("spark_label", { sensor: label, n: points.length, lo: number(Math.min(...values)), hi: number(Math.max(...values)), unit }) });
    const limitText = [];
    if (typeof history.alarm_high === "number") {
      chart.append(svg("rect", { class: "spark-band", x: 0, y: 0, width: WIDTH, height: y(history.alarm_high) }),
        svg("line", { class: "spark-limit", "data-testid": "spark-limit", "data-limit": "high", x1: 0, x2: WIDTH,
          y1: y(history.alarm_high), y2: y(history.alarm_high), "vector-effect": "non-scaling-stroke" }));
      limitText.push(t("spark_limit_high", { value: number(history.alarm_high), unit }));
    }
    if (typeof history.alarm_low === "number") {
      const top = y(history.alarm_low);
      chart.append(svg("rect", { class: "spark-band", x: 0, y: top, width: WIDTH, height: (HEIGHT - top).toFixed(1) }),
        svg("line", { class: "spark-limit", "data-testid": "spark-limit", "data-limit": "low", x1: 0, x2: WIDTH,
          y1: top, y2: top, "vector-effect": "non-scaling-stroke" }));
      limitText.push(t("spark_limit_low", { value: number(history.alarm_low), unit }));
    }
    const path = points.map(([ts, v], i) => `${i ? "L" : "M"}${x(ts)} ${y(v)}`).join(" ");
    chart.append(svg("path", { class: "spark-line", "data-testid": "spark-line", d: path, "vector-effect": "non-scaling-stroke" }));
    const [lastTs, lastValue] = points[points.length - 1];
    // A circle would be stretched into an ellipse by the free aspect ratio: a zero-length round-capped line stays round.
    chart.append(svg("line", { class: "spark-dot", x1: x(lastTs), x2: x(lastTs), y1: y(lastValue), y2: y(lastValue),
      "vector-effect": "non-scaling-stroke" }));

    box.replaceChildren(chart, el("div", { class: "spark-caption" }, trend,
      el("span", { class: "muted small", text: t("spark_range", { lo: number(Math.min(...values)), hi: number(Math.max(...values)), unit }) }),
      limitText.length ? el("span", { class: "muted small", "data-testid": "spark-limits", text: limitText.join(" · ") }) : null));
  }

  window.FixloopSparkline = { element };
})();
