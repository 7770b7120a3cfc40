// Hand-made KV Connect requests for the security and hostile-input tests, where the
// real clients cannot send what we need (foreign database ids, broken bodies, floods).
//
// * H2: a node:http2 session (h2c with prior knowledge for http://, TLS + ALPN h2 for
//   https://) with a request() that never throws on protocol errors: a reset stream
//   or a dead session comes back as { status: undefined, error, rstCode }.
// * metadata() / dataPath(): the metadata exchange and the data-path calls, with the
//   data-path bodies taken from the shared fixtures (byte-identical to Deno's requests).
// * rawExchange(): one TCP or TLS connection, bytes in, everything the server sends
//   until it closes (or a time limit), for malformed HTTP/1.1 and garbage input.
import fs from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import path from "node:path";
import tls from "node:tls";
import { E2E_DIR, sleep } from "./harness.mjs";

/** The shared fixtures directory, a sibling of the repository (see its README). */
export const FIXTURES_DIR = path.resolve(E2E_DIR, "../fixtures");

/** A data-path request body Deno 2.9.6 sends, e.g. fixture("snapshot_read_get"). */
export function fixture(name) {
  const file = path.join(FIXTURES_DIR, "requests", `${name}.bin`);
  if (!fs.existsSync(file)) throw new Error(`fixture ${file} is missing`);
  return fs.readFileSync(file);
}

export const METADATA_BODY = JSON.stringify({ supportedVersions: [1, 2, 3] });

export class H2 {
  constructor(session, url) {
    this.session = session;
    this.url = url;
    this.goaway = null;
    this.sessionError = null;
    session.on("goaway", (code, lastStreamId) => {
      this.goaway = { code, lastStreamId };
    });
    session.on("error", (e) => {
      this.sessionError = e;
    });
  }

  /** Connects to `url` (http:// = h2c, https:// = TLS; `ca` = PEM text to trust). */
  static async connect(url, { ca, timeoutMs = 10_000 } = {}) {
    const session = http2.connect(url, ca ? { ca } : {});
    await new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        session.destroy();
        reject(new Error(`HTTP/2 connect to ${url} timed out after ${timeoutMs} ms`));
      }, timeoutMs);
      session.once("connect", () => {
        clearTimeout(timer);
        resolve();
      });
      session.once("error", (e) => {
        clearTimeout(timer);
        reject(e);
      });
    });
    return new H2(session, url);
  }

  get alive() {
    return !this.session.closed && !this.session.destroyed;
  }

  /**
   * One request. Resolves { status, headers, body (Buffer), text } or, when the stream
   * is reset or the session dies, { status: undefined, error, rstCode }.
   */
  request(reqPath, { method = "POST", headers = {}, body, timeoutMs = 10_000 } = {}) {
    return new Promise((resolve) => {
      let stream;
      try {
        stream = this.session.request({ ":method": method, ":path": reqPath, ...headers });
      } catch (e) {
        resolve({ status: undefined, error: e.code ?? e.message });
        return;
      }
      let status;
      let resHeaders = {};
      const chunks = [];
      let settled = false;
      const finish = (extra = {}) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        const buf = Buffer.concat(chunks);
        resolve({ status, headers: resHeaders, body: buf, text: buf.toString("utf8"), ...extra });
      };
      const timer = setTimeout(() => {
        finish({ status: undefined, error: `no complete answer within ${timeoutMs} ms (status ${status})` });
        stream.close(http2.constants.NGHTTP2_CANCEL);
      }, timeoutMs);
      stream.on("response", (h) => {
        status = h[":status"];
        resHeaders = h;
      });
      stream.on("data", (d) => chunks.push(d));
      stream.on("end", () => finish());
      stream.on("error", (e) => finish({ status: undefined, error: e.code ?? e.message, rstCode: stream.rstCode }));
      stream.on("close", () => {
        if (stream.rstCode && stream.rstCode !== http2.constants.NGHTTP2_NO_ERROR) {
          finish({ status: undefined, error: "stream reset", rstCode: stream.rstCode });
        } else {
          finish();
        }
      });
      stream.end(body);
    });
  }

  close() {
    if (this.alive) this.session.close();
    setTimeout(() => this.session.destroy(), 1000).unref();
  }
}

/** Runs fn(h2) on a fresh session to `url`, then closes it. */
export async function withH2(url, opts, fn) {
  const h2 = await H2.connect(url, opts);
  try {
    return await fn(h2);
  } finally {
    h2.close();
  }
}

/**
 * The metadata exchange: POST `reqPath` (default "/") with `token`.
 * Resolves { status, text, json } (json undefined unless the body is JSON).
 */
export async function metadata(h2, token, { reqPath = "/", body = METADATA_BODY, headers = {} } = {}) {
  const res = await h2.request(reqPath, {
    headers: {
      ...(token !== undefined ? { authorization: `Bearer ${token}` } : {}),
      "content-type": "application/json",
      ...headers,
    },
    body,
  });
  let json;
  try {
    json = JSON.parse(res.text);
  } catch {
    // not JSON
  }
  return { ...res, json };
}

/**
 * A data-path call (`method`: snapshot_read | atomic_write | watch) with the data-path
 * token and database id of a metadata answer `meta` (overridable) and `body` (Buffer).
 */
export async function dataPath(h2, meta, method, body, { token, databaseId, timeoutMs } = {}) {
  const endpoint = meta.endpoints.find((e) => e.consistency === "strong") ?? meta.endpoints[0];
  const base = new URL(endpoint.url, `${h2.url}/`);
  return await h2.request(`${base.pathname.replace(/\/$/, "")}/${method}`, {
    headers: {
      authorization: `Bearer ${token ?? meta.token}`,
      "x-denokv-version": String(meta.version),
      "x-denokv-database-id": databaseId ?? meta.databaseId,
      "content-type": "application/x-protobuf",
    },
    body,
    timeoutMs,
  });
}

// ---------------------------------------------------------------------------
// Protobuf of the KV Connect data path (proto/datapath.proto), just what the tests need to
// send bytes no real client sends (keys that are no Deno key, bad limits) and to read entries.

export function pbVarint(n) {
  let v = BigInt.asUintN(64, BigInt(n));
  const out = [];
  do {
    let b = Number(v & 0x7fn);
    v >>= 7n;
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
  return Buffer.from(out);
}
/** A length-delimited field `no` holding `buf`. */
export const pbBytes = (no, buf) => Buffer.concat([pbVarint((no << 3) | 2), pbVarint(buf.length), buf]);
/** A varint field `no`. */
export const pbInt = (no, n) => Buffer.concat([pbVarint(no << 3), pbVarint(n)]);
export const M_SET = 1;
export const M_DELETE = 2;
export const M_SUM = 3;
export const VE_V8 = 1;
export const VE_LE64 = 2;
export const VE_BYTES = 3;
/** One AtomicWrite.mutations field (concatenate several for one write; `value: false` for none). */
export const pbMutation = (key, { type = M_SET, data = Buffer.from("v"), encoding = VE_BYTES, expireAt, value = true } = {}) =>
  pbBytes(2, Buffer.concat([
    pbBytes(1, key),
    ...(value ? [pbBytes(2, Buffer.concat([pbBytes(1, data), pbInt(2, encoding)]))] : []),
    pbInt(3, type),
    ...(expireAt !== undefined ? [pbInt(4, expireAt)] : []),
  ]));
/** One AtomicWrite.checks field. */
export const pbCheck = (key, versionstamp) => pbBytes(1, Buffer.concat([pbBytes(1, key), pbBytes(2, versionstamp)]));
/** One SnapshotRead.ranges field: [start, end), at most `limit` entries. */
export const pbRange = (start, end, limit = 10) => pbBytes(1, Buffer.concat([pbBytes(1, start), pbBytes(2, end), pbInt(3, limit)]));

/** The fields of a protobuf message: [{ no, value }] (value: BigInt for varints, else a Buffer). */
export function pbFields(buf) {
  const out = [];
  let i = 0;
  const varint = () => {
    let v = 0n;
    for (let shift = 0n; ; shift += 7n) {
      if (i >= buf.length) throw new Error("truncated protobuf varint");
      const b = buf[i++];
      v |= BigInt(b & 0x7f) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  while (i < buf.length) {
    const tag = Number(varint());
    const no = tag >> 3;
    const wire = tag & 7;
    if (wire === 0) {
      out.push({ no, value: varint() });
    } else if (wire === 2) {
      const len = Number(varint());
      if (i + len > buf.length) throw new Error("truncated protobuf field");
      out.push({ no, value: buf.subarray(i, i + len) });
      i += len;
    } else if (wire === 1 || wire === 5) {
      const len = wire === 1 ? 8 : 4;
      out.push({ no, value: buf.subarray(i, i + len) });
      i += len;
    } else {
      throw new Error(`protobuf wire type ${wire}`);
    }
  }
  return out;
}

/** The entries of a SnapshotReadOutput, range by range: [[{ key, value, encoding, versionstamp }]]. */
export function snapshotReadEntries(body) {
  return pbFields(body).filter((f) => f.no === 1).map((range) =>
    pbFields(range.value).filter((f) => f.no === 1).map((entry) => {
      const e = { key: Buffer.alloc(0), value: Buffer.alloc(0), encoding: 0, versionstamp: Buffer.alloc(0) };
      for (const f of pbFields(entry.value)) {
        if (f.no === 1) e.key = Buffer.from(f.value);
        if (f.no === 2) e.value = Buffer.from(f.value);
        if (f.no === 3) e.encoding = Number(f.value);
        if (f.no === 4) e.versionstamp = Buffer.from(f.value);
      }
      return e;
    }));
}

/** Short description of an H2.request() result for the observation tables. */
export function describeAnswer(res) {
  if (res.status === undefined) {
    return `${res.error}${res.rstCode !== undefined ? ` (RST_STREAM code ${res.rstCode})` : ""}`;
  }
  const text = res.text.length > 90 ? `${res.text.slice(0, 90)}…` : res.text;
  return `${res.status}${text ? ` "${text.trim()}"` : ""}`;
}

/**
 * Opens a TCP connection (or TLS with `tlsOptions`) to 127.0.0.1:`port`, calls
 * `send(socket)` (which may write slowly and must stop when socket.destroyed), and
 * collects what comes back until the server closes the connection or `timeoutMs`.
 * With `until(text)`: once it holds, waits at most `graceMs` more for the close.
 * Resolves { data (Buffer), text, closed, closedBy, elapsedMs, error, alpn }.
 */
export function rawExchange(port, send, { tlsOptions, timeoutMs = 15_000, until, graceMs = 1000 } = {}) {
  return new Promise((resolve) => {
    const started = Date.now();
    const chunks = [];
    let settled = false;
    let alpn;
    const sock = tlsOptions
      ? tls.connect({ host: "127.0.0.1", port, ...tlsOptions })
      : net.connect({ host: "127.0.0.1", port });
    const finish = (closedBy, error) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(graceTimer);
      const data = Buffer.concat(chunks);
      resolve({
        data,
        text: data.toString("latin1"),
        closed: closedBy !== "timeout",
        closedBy,
        elapsedMs: Date.now() - started,
        error: error?.code ?? error?.message,
        alpn,
      });
      sock.destroy();
    };
    const timer = setTimeout(() => finish("timeout"), timeoutMs);
    let graceTimer;
    sock.on("data", (d) => {
      chunks.push(d);
      if (until && !graceTimer && until(Buffer.concat(chunks).toString("latin1"))) {
        graceTimer = setTimeout(() => finish("timeout"), graceMs);
      }
    });
    sock.on("end", () => finish("server (FIN)"));
    sock.on("close", () => finish("server"));
    sock.on("error", (e) => finish("error", e));
    sock.once(tlsOptions ? "secureConnect" : "connect", () => {
      alpn = sock.alpnProtocol;
      Promise.resolve(send(sock)).catch(() => {});
    });
  });
}

/** Writes `bytes` one at a time, `intervalMs` apart, until done or the socket closes. */
export async function trickle(sock, bytes, intervalMs) {
  const buf = Buffer.from(bytes);
  for (let i = 0; i < buf.length; i++) {
    if (sock.destroyed || sock.writableEnded) return;
    sock.write(buf.subarray(i, i + 1));
    await sleep(intervalMs);
  }
}

/** An HTTP/1.1 POST with Content-Length and `Connection: close`, as a string. */
export function http1Post(reqPath, { headers = {}, body = "" } = {}) {
  const lines = [`POST ${reqPath} HTTP/1.1`, "Host: 127.0.0.1", "Connection: close"];
  for (const [k, v] of Object.entries(headers)) lines.push(`${k}: ${v}`);
  lines.push(`Content-Length: ${Buffer.byteLength(body)}`);
  return `${lines.join("\r\n")}\r\n\r\n${body}`;
}

/** The body of an HTTP/1.1 answer read until close (no chunked decoding). */
export function http1Body(text) {
  const i = text.indexOf("\r\n\r\n");
  return i < 0 ? "" : text.slice(i + 4);
}

/**
 * Calls `fn` every `intervalMs` until `done(value)` holds; resolves the last value.
 * Throws (with `what` and the last value) after `timeoutMs`.
 */
export async function pollUntil(fn, done, { timeoutMs = 10_000, intervalMs = 200, what = "condition" } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  for (;;) {
    last = await fn();
    if (done(last)) return last;
    if (Date.now() >= deadline) {
      const shown = typeof last === "object" ? JSON.stringify(last, (k, v) => (k === "body" ? undefined : v)) : String(last);
      throw new Error(`${what}: still not reached after ${timeoutMs} ms; last value: ${shown}`);
    }
    await sleep(intervalMs);
  }
}

/** The first line of an HTTP/1.1 answer ("HTTP/1.1 431 ..."), or "" if none. */
export function statusLine(text) {
  const m = /^HTTP\/1\.[01] \d{3}[^\r\n]*/.exec(text);
  return m ? m[0] : "";
}

// ---------------------------------------------------------------------------
// Raw HTTP/2 frames, for what node:http2 refuses to do (it never opens more streams
// than the server allows, so it cannot flood).

export const H2_FRAME = { DATA: 0, HEADERS: 1, RST_STREAM: 3, SETTINGS: 4, PING: 6, GOAWAY: 7, WINDOW_UPDATE: 8, CONTINUATION: 9 };
export const H2_ERROR_NAMES = [
  "NO_ERROR", "PROTOCOL_ERROR", "INTERNAL_ERROR", "FLOW_CONTROL_ERROR", "SETTINGS_TIMEOUT", "STREAM_CLOSED",
  "FRAME_SIZE_ERROR", "REFUSED_STREAM", "CANCEL", "COMPRESSION_ERROR", "CONNECT_ERROR", "ENHANCE_YOUR_CALM",
  "INADEQUATE_SECURITY", "HTTP_1_1_REQUIRED",
];
const PREFACE = Buffer.from("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", "latin1");

function frame(type, flags, streamId, payload = Buffer.alloc(0)) {
  const head = Buffer.alloc(9);
  head.writeUIntBE(payload.length, 0, 3);
  head[3] = type;
  head[4] = flags;
  head.writeUInt32BE(streamId & 0x7fffffff, 5);
  return Buffer.concat([head, payload]);
}

/** HPACK integer with an N-bit prefix (RFC 7541 §5.1). */
function hpackInt(value, prefixBits, firstByte = 0) {
  const max = (1 << prefixBits) - 1;
  if (value < max) return [firstByte | value];
  const out = [firstByte | max];
  value -= max;
  while (value >= 128) {
    out.push((value % 128) + 128);
    value = Math.floor(value / 128);
  }
  out.push(value);
  return out;
}

/** A header block of "literal header field without indexing, new name" entries. */
export function hpackLiterals(headers) {
  const parts = [];
  for (const [name, value] of headers) {
    const n = Buffer.from(name, "latin1");
    const v = Buffer.from(value, "latin1");
    parts.push(Buffer.from([0x00, ...hpackInt(n.length, 7)]), n, Buffer.from(hpackInt(v.length, 7)), v);
  }
  return Buffer.concat(parts);
}

export class RawH2 {
  constructor(sock) {
    this.sock = sock;
    this.buf = Buffer.alloc(0);
    this.frames = [];
    this.closed = false;
    this.waiters = [];
    sock.on("data", (d) => this.onData(d));
    sock.on("close", () => {
      this.closed = true;
      this.wake();
    });
    sock.on("error", () => {});
  }

  /** Connects (h2c prior knowledge), exchanges SETTINGS and acknowledges the server's. */
  static async connect(port, { timeoutMs = 10_000 } = {}) {
    const sock = net.connect({ host: "127.0.0.1", port });
    await new Promise((resolve, reject) => {
      sock.once("connect", resolve);
      sock.once("error", reject);
    });
    const h2 = new RawH2(sock);
    sock.write(Buffer.concat([PREFACE, frame(H2_FRAME.SETTINGS, 0, 0)]));
    const ok = await h2.waitFor((f) => f.type === H2_FRAME.SETTINGS && !(f.flags & 1), timeoutMs);
    if (!ok) {
      sock.destroy();
      throw new Error("no SETTINGS frame from the server");
    }
    return h2;
  }

  onData(d) {
    this.buf = Buffer.concat([this.buf, d]);
    while (this.buf.length >= 9) {
      const len = this.buf.readUIntBE(0, 3);
      if (this.buf.length < 9 + len) break;
      const f = {
        type: this.buf[3],
        flags: this.buf[4],
        streamId: this.buf.readUInt32BE(5) & 0x7fffffff,
        payload: this.buf.subarray(9, 9 + len),
      };
      this.buf = this.buf.subarray(9 + len);
      this.frames.push(f);
      if (f.type === H2_FRAME.SETTINGS && !(f.flags & 1)) this.write(frame(H2_FRAME.SETTINGS, 1, 0));
      if (f.type === H2_FRAME.PING && !(f.flags & 1)) this.write(frame(H2_FRAME.PING, 1, 0, f.payload));
    }
    this.wake();
  }

  wake() {
    for (const w of this.waiters.splice(0)) w();
  }

  write(buf) {
    if (!this.sock.destroyed) this.sock.write(buf);
  }

  /** Resolves true once a received frame matches `pred`, false on close or timeout. */
  async waitFor(pred, timeoutMs) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.frames.some(pred)) return true;
      if (this.closed || Date.now() >= deadline) return false;
      await new Promise((resolve) => {
        const timer = setTimeout(resolve, Math.max(1, deadline - Date.now()));
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  /** HEADERS (+ CONTINUATION) frames opening `streamId`; END_STREAM only if `endStream`. */
  headers(streamId, headerList, { endStream = false, maxFrame = 16_384 } = {}) {
    const block = hpackLiterals(headerList);
    const out = [];
    for (let off = 0; off < block.length || off === 0; off += maxFrame) {
      const chunk = block.subarray(off, off + maxFrame);
      const last = off + maxFrame >= block.length;
      const type = off === 0 ? H2_FRAME.HEADERS : H2_FRAME.CONTINUATION;
      const flags = (last ? 0x4 : 0) | (off === 0 && endStream ? 0x1 : 0);
      out.push(frame(type, flags, streamId, chunk));
      if (last) break;
    }
    return Buffer.concat(out);
  }

  /** Counts of what came back: RST_STREAM codes, GOAWAY, response HEADERS. */
  summary() {
    const rst = {};
    let goaway = null;
    let headers = 0;
    for (const f of this.frames) {
      if (f.type === H2_FRAME.RST_STREAM) {
        const name = H2_ERROR_NAMES[f.payload.readUInt32BE(0)] ?? String(f.payload.readUInt32BE(0));
        rst[name] = (rst[name] ?? 0) + 1;
      } else if (f.type === H2_FRAME.GOAWAY && !goaway) {
        const code = f.payload.readUInt32BE(4);
        goaway = {
          lastStreamId: f.payload.readUInt32BE(0) & 0x7fffffff,
          code: H2_ERROR_NAMES[code] ?? String(code),
          debug: f.payload.subarray(8).toString("utf8"),
        };
      } else if (f.type === H2_FRAME.HEADERS) {
        headers++;
      }
    }
    return { rst, goaway, headers, closed: this.closed };
  }

  close() {
    this.sock.destroy();
  }
}
