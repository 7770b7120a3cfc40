// The admin JSON API (/admin/v1, schemas/admin-api.schema.json) from the browser. The access
// token is sent as `Authorization: Bearer` on every call and lives only in this object (the page
// decides whether sessionStorage keeps a copy for the tab); cookies are never sent.

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;  // HTTP status; 0 when the server could not be reached
    this.code = code;      // the API's code name, e.g. "conflict", "unauthenticated"
  }
}

const db = (name) => `/databases/${encodeURIComponent(name)}`;

export class AdminClient {
  constructor(token, base = "/admin/v1") {
    this.token = token;
    this.base = base;
  }

  async call(method, path, body, { signal } = {}) {
    const res = await reach(this.base + path, this.init(method, body, signal));
    const text = await res.text();
    let json = null;
    try {
      json = text ? JSON.parse(text) : null;
    } catch {
      // a non-JSON answer (e.g. from a proxy): its text is the message
    }
    if (!res.ok) {
      throw new ApiError(res.status, json?.code ?? `http_${res.status}`,
        json?.error ?? (text.trim() || res.statusText));
    }
    return json;
  }

  init(method, body, signal) {
    const headers = { authorization: `Bearer ${this.token}` };
    if (body !== undefined) headers["content-type"] = "application/json";
    return {
      method, headers, signal, body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
    };
  }

  databases() {
    return this.call("GET", "/databases");
  }

  // {prefix?, start?, end?, limit?, reverse?, cursor?, raw?} -> {entries, cursor}
  list(name, request) {
    return this.call("POST", `${db(name)}/entries/list`, request);
  }

  // The distinct next key parts under a prefix, with their entry counts (the folders).
  // {prefix?, limit?, cursor?} -> {children: [{part, count, count_capped, has_value, entry?}],
  // cursor}
  children(name, request) {
    return this.call("POST", `${db(name)}/entries/children`, request);
  }

  // -> the entry or null
  async get(name, key, raw = false) {
    return (await this.call("POST", `${db(name)}/entries/get`, { key, raw })).entry;
  }

  // versionstamp: undefined writes unconditionally, null only if absent, a string only if the
  // entry still has it (else ApiError 409 "conflict"). -> {ok, versionstamp}
  set(name, key, value, { versionstamp, expireIn } = {}) {
    const body = { key, value };
    if (versionstamp !== undefined) body.versionstamp = versionstamp;
    if (expireIn) body.expire_in = expireIn;
    return this.call("POST", `${db(name)}/entries/set`, body);
  }

  remove(name, key, versionstamp) {
    const body = { key };
    if (versionstamp !== undefined) body.versionstamp = versionstamp;
    return this.call("POST", `${db(name)}/entries/delete`, body);
  }

  count(name, selector = {}) {
    return this.call("POST", `${db(name)}/entries/count`, selector);
  }

  // Watches {keys: [key]} or {prefix: key}: calls onOpen() once the stream is open and
  // onEntries(items) for every event ({key, value, versionstamp}; value and versionstamp null
  // for a key without an entry). Resolves when the server ends the stream; rejects with
  // AbortError when `signal` aborts, ApiError when the server refuses.
  // EventSource cannot send an Authorization header, so this reads the stream with fetch.
  async watch(name, selector, { signal, onOpen, onEntries }) {
    const res = await reach(`${this.base}${db(name)}/watch`, this.init("POST", selector, signal));
    if (!res.ok) throw await errorOf(res);
    onOpen?.();
    await readEvents(res.body, (event, data) => {
      if (event === "entries") onEntries(JSON.parse(data).entries);
    });
  }
}

// Reads a text/event-stream body, calling onEvent(name, data) per event; comments (keepalives)
// are skipped.
export async function readEvents(body, onEvent) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const dispatch = (block) => {
    let event = "message";
    const data = [];
    for (const line of block.split("\n")) {
      if (line === "" || line.startsWith(":")) continue;
      const colon = line.indexOf(":");
      const field = colon < 0 ? line : line.slice(0, colon);
      let value = colon < 0 ? "" : line.slice(colon + 1);
      if (value.startsWith(" ")) value = value.slice(1);
      if (field === "event") event = value;
      else if (field === "data") data.push(value);
    }
    if (data.length) onEvent(event, data.join("\n"));
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      // Line ends may be CRLF or CR; a CR at the very end may be the first half of a CRLF.
      const cut = buffer.endsWith("\r") ? buffer.length - 1 : buffer.length;
      buffer = buffer.slice(0, cut).replace(/\r\n?/g, "\n") + buffer.slice(cut);
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        dispatch(buffer.slice(0, end));
        buffer = buffer.slice(end + 2);
      }
    }
  } finally {
    reader.releaseLock();
  }
}

// The server's Prometheus text at /metrics as [{name, labels, value}]. It needs the bootstrap
// token (unless the operator opened it with --metrics-public); a database's admin token gets 403.
export async function fetchMetrics(token) {
  const res = await fetch("/metrics", {
    headers: { authorization: `Bearer ${token}` },
    cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
  });
  if (!res.ok) throw new ApiError(res.status, `http_${res.status}`, await res.text());
  const samples = [];
  for (const line of (await res.text()).split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels = {};
    for (const l of (m[2] ?? "").matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) {
      labels[l[1]] = l[2].replace(/\\(.)/g, (_, c) => (c === "n" ? "\n" : c));
    }
    samples.push({ name: m[1], labels, value: Number(m[3]) });
  }
  return samples;
}

// --- Tokens, queue, export and import (the Tokens, Queue and Import/Export pages) -------------
// Added as methods of AdminClient; the ones above stay as they are.

Object.assign(AdminClient.prototype, {
  // -> {tokens: [Token]} (needs the server's bootstrap token; others get 403)
  tokens() {
    return this.call("GET", "/tokens");
  },

  // {scope, database? | databases? | all_databases?, expires?, name?, rate_limit?}
  // -> {token, info}: the whole token, which the server never shows again
  createToken(request) {
    return this.call("POST", "/tokens", request);
  },

  // -> {id}
  revokeToken(id) {
    return this.call("DELETE", `/tokens/${encodeURIComponent(id)}`);
  },

  // -> {ready, delayed, leased, dead, undelivered}
  queueCounts(name) {
    return this.call("GET", `${db(name)}/queue`);
  },

  // {limit?, cursor?} -> {dead_letters: [{id, value, keys_if_undelivered, attempts, last_error,
  // dead_at}], cursor}
  deadLetters(name, request = {}) {
    return this.call("POST", `${db(name)}/queue/dead/list`, request);
  },

  // {ids: [...]} or {all: true} -> {count}
  requeueDead(name, selection) {
    return this.call("POST", `${db(name)}/queue/dead/requeue`, selection);
  },

  purgeDead(name, selection) {
    return this.call("POST", `${db(name)}/queue/dead/purge`, selection);
  },

  // Streams POST .../export (one snapshot) into memory: onBytes(received) as chunks arrive.
  // -> {blob, bytes, versionstamp}. A body that breaks off (the server gave up, the network
  // failed) rejects: a dump cut short is never returned as if it were whole.
  async exportDump(name, selector, { signal, onBytes } = {}) {
    const res = await reach(`${this.base}${db(name)}/export`, this.init("POST", selector, signal));
    if (!res.ok) throw await errorOf(res);
    const reader = res.body.getReader();
    const parts = [];
    let bytes = 0;
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        parts.push(value);
        bytes += value.length;
        onBytes?.(bytes);
      }
    } catch (e) {
      if (e.name === "AbortError") throw e;
      throw new ApiError(0, "network", `The export broke off after ${bytes} bytes ` +
        `(${e.message}); nothing was saved.`);
    }
    return {
      blob: new Blob(parts, { type: "application/x-ndjson" }), bytes,
      versionstamp: res.headers.get("x-kvc-versionstamp"),
    };
  },

  // Sends NDJSON lines (bytes) to POST .../import. options: {mode: "merge"|"replace", prefix
  // (KvKeyJSON), batch, firstLine, signal}. -> ImportResult {entries, bytes, batches, deleted,
  // last_line, seconds}. A refused import rejects with an ApiError whose `details` is the
  // ImportError answer (line, and what was written before it).
  async importLines(name, body, { mode = "merge", prefix, batch, firstLine, signal } = {}) {
    const query = new URLSearchParams({ mode });
    if (prefix && prefix.length) query.set("prefix", JSON.stringify(prefix));
    if (batch) query.set("batch", String(batch));
    if (firstLine) query.set("first_line", String(firstLine));
    const res = await reach(`${this.base}${db(name)}/import?${query}`, {
      method: "POST", signal, body,
      headers: { authorization: `Bearer ${this.token}`, "content-type": "application/x-ndjson" },
      cache: "no-store", credentials: "omit", referrerPolicy: "no-referrer",
    });
    if (!res.ok) throw await errorOf(res);
    return res.json();
  },
});

// fetch(), with a failure to reach the server as ApiError(0, "network"); an abort is rethrown.
async function reach(url, init) {
  try {
    return await fetch(url, init);
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "network", `The server could not be reached (${e.message}).`);
  }
}

// The ApiError for a refused answer; `details` keeps its whole JSON (or null).
async function errorOf(res) {
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    // not JSON
  }
  const e = new ApiError(res.status, json?.code ?? `http_${res.status}`,
    json?.error ?? (text.trim() || res.statusText));
  e.details = json;
  return e;
}
