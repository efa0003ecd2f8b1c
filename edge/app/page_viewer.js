// The cited manual page, full-screen. An <img> cannot send the tablet's token, so the page is fetched
// with it and shown from a blob URL (revoked on close). Pinch, double-tap, the wheel and the +/− buttons
// zoom; one finger (or the mouse) pans. The stage's data-zoom says how far it is zoomed (1 = fitted).
"use strict";

(function () {
  const MAX_ZOOM = 6;
  const BUTTON_STEP = 1.6;
  const DOUBLE_TAP_ZOOM = 2.5;
  const DOUBLE_TAP_MS = 350;
  const TAP_SLOP_PX = 12; // a finger that moved less than this tapped rather than dragged

  let current = null;

  // ui: the app's {el, t} (DOM builder and text in the card's language); token: the tablet's.
  function open({ url, token, title, alt, ui }) {
    if (current) current.close();
    const { el, t } = ui;
    const controller = new AbortController();
    const view = { fit: 1, zoom: 1, x: 0, y: 0 };
    const pointers = new Map();
    let pinch = null;
    let lastTap = null;
    let blobUrl = null;
    let closed = false;

    const image = el("img", { class: "viewer-image", alt, draggable: "false", "data-testid": "page-image", hidden: true });
    const status = el("div", { class: "viewer-status", role: "status", "data-testid": "viewer-status" },
      el("span", { class: "spinner" }), el("span", { text: t("viewer_loading") }));
    const stage = el("div", { class: "viewer-stage", "data-testid": "viewer-stage", "data-zoom": "1.00" }, image, status);
    const button = (label, testid, symbol, onclick) => el("button", {
      type: "button", class: "ghost viewer-button", "aria-label": label, title: label, "data-testid": testid, onclick, text: symbol,
    });
    const dialog = el("dialog", { class: "viewer", "data-testid": "page-viewer", "aria-label": title },
      el("div", { class: "viewer-bar" },
        el("div", { class: "viewer-title" }, el("strong", { text: title }), el("span", { class: "viewer-hint", text: t("viewer_hint") })),
        button(t("zoom_out"), "zoom-out", "−", () => zoomBy(1 / BUTTON_STEP)),
        button(t("zoom_in"), "zoom-in", "+", () => zoomBy(BUTTON_STEP)),
        button(t("zoom_fit"), "zoom-fit", "⤢", () => { view.zoom = 1; place(); }),
        button(t("close"), "close-viewer", "✕", () => dialog.close())),
      stage);

    function failed(detail) {
      status.replaceChildren(el("span", { class: "error-text", "data-testid": "viewer-error", text: t("viewer_error", { detail }) }));
    }

    function place() {
      const box = stage.getBoundingClientRect();
      const scale = view.fit * view.zoom;
      const width = image.naturalWidth * scale;
      const height = image.naturalHeight * scale;
      // A page smaller than the screen stays centred; a larger one cannot be dragged off it.
      view.x = width <= box.width ? (box.width - width) / 2 : Math.min(0, Math.max(box.width - width, view.x));
      view.y = height <= box.height ? (box.height - height) / 2 : Math.min(0, Math.max(box.height - height, view.y));
      image.style.transform = `translate(${view.x}px, ${view.y}px) scale(${scale})`;
      stage.dataset.zoom = view.zoom.toFixed(2);
    }

    // Zoom keeping the page point under (cx, cy) — stage coordinates — where it is.
    function zoomAt(zoom, cx, cy) {
      const before = view.fit * view.zoom;
      view.zoom = Math.min(MAX_ZOOM, Math.max(1, zoom));
      const after = view.fit * view.zoom;
      view.x = cx - ((cx - view.x) / before) * after;
      view.y = cy - ((cy - view.y) / before) * after;
      place();
    }

    function zoomBy(factor) {
      const box = stage.getBoundingClientRect();
      zoomAt(view.zoom * factor, box.width / 2, box.height / 2);
    }

    function fitToStage() {
      const box = stage.getBoundingClientRect();
      if (!image.naturalWidth || !box.width) return;
      view.fit = Math.min(box.width / image.naturalWidth, box.height / image.naturalHeight);
      place();
    }

    function local(event) {
      const box = stage.getBoundingClientRect();
      return { x: event.clientX - box.left, y: event.clientY - box.top };
    }

    function pinchOf() {
      const [a, b] = [...pointers.values()];
      return { distance: Math.hypot(a.x - b.x, a.y - b.y) || 1, x: (a.x + b.x) / 2, y: (a.y + b.y) / 2 };
    }

    stage.addEventListener("pointerdown", (event) => {
      if (image.hidden) return;
      try { stage.setPointerCapture(event.pointerId); } catch (_) { /* a pointer the browser no longer tracks */ }
      const at = local(event);
      pointers.set(event.pointerId, { x: at.x, y: at.y, startX: at.x, startY: at.y });
      if (pointers.size === 2) {
        pinch = Object.assign(pinchOf(), { zoom: view.zoom });
        for (const p of pointers.values()) p.pinched = true; // neither finger of a pinch taps
      }
    });
    stage.addEventListener("pointermove", (event) => {
      const pointer = pointers.get(event.pointerId);
      if (!pointer) return;
      const at = local(event);
      const dx = at.x - pointer.x;
      const dy = at.y - pointer.y;
      pointer.x = at.x;
      pointer.y = at.y;
      if (pinch && pointers.size >= 2) {
        const now = pinchOf();
        view.x += now.x - pinch.x; // the fingers' midpoint carries the page along as it zooms
        view.y += now.y - pinch.y;
        pinch.x = now.x;
        pinch.y = now.y;
        zoomAt(pinch.zoom * (now.distance / pinch.distance), now.x, now.y);
      } else if (pointers.size === 1) {
        view.x += dx;
        view.y += dy;
        place();
      }
    });
    const release = (event) => {
      const pointer = pointers.get(event.pointerId);
      if (!pointer) return;
      pointers.delete(event.pointerId);
      if (pointers.size < 2) pinch = null;
      const tapped = event.type === "pointerup" && !pointer.pinched && pointers.size === 0
        && Math.hypot(pointer.x - pointer.startX, pointer.y - pointer.startY) < TAP_SLOP_PX;
      if (!tapped) { lastTap = null; return; }
      const now = performance.now();
      if (lastTap && now - lastTap.time < DOUBLE_TAP_MS && Math.hypot(pointer.x - lastTap.x, pointer.y - lastTap.y) < 3 * TAP_SLOP_PX) {
        lastTap = null;
        if (view.zoom > 1.01) { view.zoom = 1; place(); } else zoomAt(DOUBLE_TAP_ZOOM, pointer.x, pointer.y);
      } else {
        lastTap = { time: now, x: pointer.x, y: pointer.y };
      }
    };
    stage.addEventListener("pointerup", release);
    stage.addEventListener("pointercancel", release);
    stage.addEventListener("wheel", (event) => {
      if (image.hidden) return;
      event.preventDefault();
      const at = local(event);
      zoomAt(view.zoom * Math.exp(-event.deltaY / 300), at.x, at.y);
    }, { passive: false });
    dialog.addEventListener("keydown", (event) => {
      if (event.key === "+" || event.key === "=") zoomBy(BUTTON_STEP);
      else if (event.key === "-") zoomBy(1 / BUTTON_STEP);
    });
    window.addEventListener("resize", fitToStage);
    image.addEventListener("error", () => failed(t("viewer_not_image")));
    image.addEventListener("load", () => {
      image.hidden = false;
      status.hidden = true;
      view.zoom = 1;
      fitToStage();
    });

    // Escape closes a modal <dialog> by itself; whichever way it closes, the page's resources go.
    dialog.addEventListener("close", () => {
      closed = true;
      controller.abort();
      window.removeEventListener("resize", fitToStage);
      if (blobUrl) URL.revokeObjectURL(blobUrl);
      dialog.remove();
      if (current === handle) current = null;
    });

    const handle = { close: () => dialog.close() };
    current = handle;
    document.body.append(dialog);
    dialog.showModal();
    dialog.querySelector("[data-testid=close-viewer]").focus();

    window.FixloopRequest.request(url, token, { signal: controller.signal })
      .then((response) => response.blob())
      .then((blob) => {
        if (closed) return;
        blobUrl = URL.createObjectURL(blob);
        image.src = blobUrl;
      })
      .catch((err) => {
        if (!closed) failed(err.message);
      });
    return handle;
  }

  window.FixloopPageViewer = { open };
})();
