// Keeping the tablet's view of a run whole across Wi-Fi drops: the run's numbered events, resumed after the
// last one received; questions asked without a connection, kept until they can be sent; the run on screen,
// kept across a reload. No DOM here: app.js shows what this tells it.
"use strict";

window.FixloopConnection = (function () {
  const OUTBOX_KEY = "fixloop.outbox";
  const SHOWN_KEY = "fixloop.run";
  const WRITES_KEY = "fixloop.writes";
  const FIRST_RETRY_MS = 500;
  const LAST_RETRY_MS = 8000;
  // The service sends a comment on a stream with nothing to say every X-Keep-Alive-S seconds (15 until it
  // says); a stream silent for this many of those intervals is taken as dead.
  const KEEP_ALIVE_S = 15;
  const SILENT_INTERVALS = 2.5;

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
  // through its offline mode), so the browser going offline is taken as the end of the stream, and so is a
  // stream that stays silent through its keep-alives while the browser thinks it is online.
  async function readEvents(response, onEvent, silentMs) {
    const reader = response.body.getReader();
    const cut = () => { reader.cancel().catch(() => {}); };
    window.addEventListener("offline", cut);
    let silence = setTimeout(cut, silentMs);
    const decoder = new TextDecoder();
    let buffer = "";
    try {
      for (;;) {
        const chunk = await reader.read();
        clearTimeout(silence);
        if (chunk.done) return;
        silence = setTimeout(cut, silentMs);
        buffer += decoder.decode(chunk.value, { stream: true });
        let end;
        while ((end = buffer.indexOf("\n\n")) >= 0) {
          const block = parseBlock(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
          if (block.data) onEvent(block.id, JSON.parse(block.data));
        }
      }
    } finally {
      clearTimeout(silence);
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
  // `open(lastId, signal)` resolves to a stream of the events after lastId (-1: all of them), or rejects with
  // an error carrying the HTTP `status` when the service refuses; `response` is an already open stream
  // to read first (the POST that started the run). `status` hears "offline", "reconnecting" and null
  // (connected). A refusal (4xx: an unknown run, a bad token) is thrown; anything else is a drop, retried.
  // Reopening is given up (`signal` aborts) after as long a silence as a stream's: the request may have gone
  // out over a kept-alive connection that died as silently as the stream did.
  async function follow({ response, open, onEvent, lastId, over, wanted, status }) {
    let attempt = 0;
    let silentMs = KEEP_ALIVE_S * SILENT_INTERVALS * 1000;
    while (!over() && wanted()) {
      if (!response) {
        if (!navigator.onLine) {
          status("offline");
          await untilOnline();
        }
        status("reconnecting");
        const giveUp = new AbortController();
        const timer = setTimeout(() => giveUp.abort(), silentMs);
        try {
          response = await open(lastId(), giveUp.signal);
        } catch (err) {
          if (err.status >= 400 && err.status < 500) throw err;
          await pause(retryDelay(attempt++));
          continue;
        } finally {
          clearTimeout(timer);
        }
      }
      status(null);
      silentMs = (Number(response.headers.get("X-Keep-Alive-S")) || KEEP_ALIVE_S) * SILENT_INTERVALS * 1000;
      const before = lastId();
      try {
        await readEvents(response, onEvent, silentMs);
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

  // A question's id, sent with it as its idempotency key (client_request_id): unique across the plant, not
  // just this tablet. crypto.randomUUID() needs a secure context, which a tablet on plain HTTP is not.
  function newId() {
    const random = Array.from(crypto.getRandomValues(new Uint8Array(8)), (b) => b.toString(16).padStart(2, "0"));
    return Date.now().toString(36) + "-" + random.join("");
  }

  // Questions not yet sent, oldest first, in localStorage: closing the tab does not lose them. A question
  // whose POST reached the service but whose answer was lost stays here and is sent again with its id:
  // the service then streams the run it already started.
  const outbox = {
    list: () => read(localStorage, OUTBOX_KEY, []),
    add(question, deviceId) {
      const item = { id: newId(), question, deviceId, queuedMs: Date.now() };
      localStorage.setItem(OUTBOX_KEY, JSON.stringify([...outbox.list(), item]));
      return item;
    },
    remove(id) {
      localStorage.setItem(OUTBOX_KEY, JSON.stringify(outbox.list().filter((item) => item.id !== id)));
    },
  };

  // What the technician wrote that is not a question (feedback on an answer), oldest first, in localStorage
  // until the service has it. Each has a `key`: a newer write with the same key replaces a queued older one
  // (a changed mind), and the service replaces what an earlier delivery of the same key stored, so one
  // resent after a lost reply is applied once.
  const writes = {
    list: () => read(localStorage, WRITES_KEY, []),
    add(key, path, body) {
      const item = { key, path, body, queuedMs: Date.now() };
      localStorage.setItem(WRITES_KEY, JSON.stringify([...writes.list().filter((w) => w.key !== key), item]));
      return item;
    },
    remove(item) {
      // Only the delivered version: a newer one queued while it was on the way stays.
      const kept = writes.list().filter((w) => !(w.key === item.key && w.queuedMs === item.queuedMs));
      localStorage.setItem(WRITES_KEY, JSON.stringify(kept));
    },
  };

  // Sends the queued writes in order. A refusal (4xx) leaves the queue and is reported with onRefused; no
  // connection, or the service failing (5xx), keeps it and the rest for the next call.
  async function flushWrites(token, onDelivered, onRefused) {
    for (const item of writes.list()) {
      try {
        await window.FixloopRequest.request(item.path, token, { method: "POST", json: item.body });
      } catch (err) {
        if (!(err instanceof window.FixloopRequest.RequestError) || err.status >= 500 || err.status === 401) return;
        writes.remove(item);
        onRefused(item, err);
        continue;
      }
      writes.remove(item);
      onDelivered(item);
    }
  }

  // The run on screen, per tab (sessionStorage): a reload shows it again, a new tab starts empty.
  const shownRun = {
    get: () => read(sessionStorage, SHOWN_KEY, null),
    set: (run) => sessionStorage.setItem(SHOWN_KEY, JSON.stringify(run)),
    clear: () => sessionStorage.removeItem(SHOWN_KEY),
  };

  return { follow, retryDelay, outbox, writes, flushWrites, shownRun };
})();
