// Keeping the tablet's view of a run whole across Wi-Fi drops: the run's numbered events, resumed after the
// last one received; questions asked without a connection, kept until they can be sent; the run on screen,
// kept across a reload. No DOM here: app.js shows what this tells it.
"use strict";

window.FixloopConnection = (function () {
  const OUTBOX_KEY = "fixloop.outbox";
  const SHOWN_KEY = "fixloop.run";
  const FIRST_RETRY_MS = 500;
  const LAST_RETRY_MS = 8000;

  // -- waiting ----------------------------------------------------------------

  // Doubling, capped, with jitter so that tablets cut off together do not all come back in the same instant.
  function retryDelay(attempt) {
    return Math.min(LAST_RETRY_MS, FIRST_RETRY_MS * 2 ** attempt) * (0.75 + Math.random() / 2);
  }

  // Waits `ms`, or less: the browser coming back online is the moment to try again.
  function pause(ms) {
    return new Promise((resolve) => {
      const done = () => { clearTimeout(timer); window.removeEventListener("online", done); resolve(); };
      const timer = setTimeout(done, ms);
      window.addEventListener("online", done);
    });
  }

  function untilOnline() {
    return navigator.onLine ? Promise.resolve() : new Promise((resolve) => window.addEventListener("online", resolve, { once: true }));
  }

  // -- reading a stream ---------------------------------------------------------

  // Calls onEvent(n, event) for each server-sent event; returns when the stream ends or is cut, throws when
  // it breaks. A dropped Wi-Fi link can leave the socket open and silent (and Chromium keeps an open stream
  // through its offline mode), so the browser going offline is taken as the end of the stream.
  async function readEvents(response, onEvent) {
    const reader = response.body.getReader();
    const cut = () => { reader.cancel().catch(() => {}); };
    window.addEventListener("offline", cut);
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const chunk = await reader.read();
        if (chunk.done) return;
        buffer += decoder.decode(chunk.value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = parseBlock(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          if (block.data) onEvent(block.id, JSON.parse(block.data));
        }
      }
    } finally {
      window.removeEventListener("offline", cut);
    }
  }

  function parseBlock(block) {
    const data = [];
    let id = null;
    for (const line of block.split("\n")) {
      if (line.startsWith("data:")) data.push(line.slice(5).trimStart());
      else if (line.startsWith("id:")) id = Number(line.slice(3).trim());
    }
    return { id, data: data.join("\n") };
  }

  // -- following a run ----------------------------------------------------------

  // Follows a run until it has said its last (`over()`) or is no longer wanted, across drops:
  // `open(lastId)` resolves to a stream of the events after lastId (-1: all of them), or rejects with
  // an error carrying the HTTP `status` when the service refuses; `response` is an already open stream
  // to read first (the POST that started the run). `status` hears "offline", "reconnecting" and null
  // (connected). A refusal (4xx: an unknown run, a bad token) is thrown; anything else is a drop, retried.
  async function follow({ response, open, onEvent, lastId, over, wanted, status }) {
    let attempt = 0;
    while (!over() && wanted()) {
      if (!response) {
        if (!navigator.onLine) {
          status("offline");
          await untilOnline();
        }
        status("reconnecting");
        try {
          response = await open(lastId());
        } catch (err) {
          if (err.status >= 400 && err.status < 500) throw err;
          await pause(retryDelay(attempt++));
          continue;
        }
      }
      status(null);
      const before = lastId();
      try {
        await readEvents(response, onEvent);
      } catch (_) { /* the stream broke: resumed below */ }
      response = null;
      if (lastId() > before) attempt = 0;
      else if (!over() && navigator.onLine) await pause(retryDelay(attempt++)); // a stream that gives nothing
    }
    status(null);
  }

  // -- what is kept on the tablet -------------------------------------------------

  function read(storage, key, fallback) {
    try {
      return JSON.parse(storage.getItem(key)) || fallback;
    } catch (_) {
      return fallback; // unreadable: start afresh rather than break the app
    }
  }

  // Questions not yet sent, oldest first, in localStorage: closing the tab does not lose them.
  const outbox = {
    list: () => read(localStorage, OUTBOX_KEY, []),
    add(question, deviceId) {
      const item = { id: Date.now().toString(36) + Math.random().toString(36).slice(2, 8), question, deviceId, queuedMs: Date.now() };
      localStorage.setItem(OUTBOX_KEY, JSON.stringify([...outbox.list(), item]));
      return item;
    },
    remove(id) {
      localStorage.setItem(OUTBOX_KEY, JSON.stringify(outbox.list().filter((item) => item.id !== id)));
    },
  };

  // The run on screen, per tab (sessionStorage): a reload shows it again, a new tab starts empty.
  const shownRun = {
    get: () => read(sessionStorage, SHOWN_KEY, null),
    set: (run) => sessionStorage.setItem(SHOWN_KEY, JSON.stringify(run)),
    clear: () => sessionStorage.removeItem(SHOWN_KEY),
  };

  return { follow, retryDelay, outbox, shownRun };
})();
