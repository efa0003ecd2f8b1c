// Requests of the app's add-ons (page viewer, sparkline, closing an order): the tablet's token, and a
// refusal in the service's own words so the place that asked can show it where the technician looks.
"use strict";

(function () {
  class RequestError extends Error {
    constructor(status, detail) {
      super(detail);
      this.status = status;
    }
  }

  // The service answers {"detail": "..."}; FastAPI's validation errors are a list of {loc, msg}.
  async function detailOf(response) {
    let body;
    try {
      body = await response.json();
    } catch (_) {
      return `${response.status} ${response.statusText}`.trim();
    }
    const detail = body && body.detail;
    if (typeof detail === "string") return detail;
    if (Array.isArray(detail)) {
      return detail.map((e) => `${(e.loc || []).filter((p) => p !== "body").join(".")}: ${e.msg}`).join("; ");
    }
    return JSON.stringify(detail);
  }

  // Resolves to the Response when it is 2xx; rejects with a RequestError (status, detail) when the service
  // refused, or with fetch's own error when there is no connection (its message says so).
  async function request(path, token, options) {
    const opts = Object.assign({}, options || {});
    opts.headers = Object.assign({ Authorization: "Bearer " + token }, opts.headers || {});
    if (opts.json !== undefined) {
      opts.headers["Content-Type"] = "application/json";
      opts.body = JSON.stringify(opts.json);
      delete opts.json;
    }
    const response = await fetch(path, opts);
    if (!response.ok) throw new RequestError(response.status, await detailOf(response));
    return response;
  }

  window.FixloopRequest = { request, RequestError };
})();
