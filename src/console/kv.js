// Keys and values of Deno KV in the JSON forms of the admin API (src/codec/v8/v8_json.h):
// a key is [{type, value}, ...] (KvKeyJSON), a value {type, value, ...} (KvValueJSON).
// Pure functions: text for people, and the small key syntax the console reads.
//
// Key syntax, as Deno code writes keys: ["users", 42, 7n, true, Uint8Array([1, 2])]; strings in
// double quotes with JSON escapes; numbers also NaN, Infinity, -Infinity; bigints with a
// trailing n; raw:BASE64 for a raw part (the bytes of a stored key that are no Deno key part,
// as URL-safe base64; clients may store any bytes as a key). A KvKeyJSON array is accepted too.

// Bytes of base64 in either alphabet, padded or not.
export function decodeBase64(text) {
  const std = text.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
  const bin = atob(std + "===".slice((std.length + 3) % 4));
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

// URL-safe base64 without padding, as the server writes it.
export function encodeBase64Url(bytes) {
  let bin = "";
  for (const b of bytes) bin += String.fromCharCode(b);
  return btoa(bin).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

function numberText(v) {
  if (typeof v === "string") return v;  // NaN, Infinity, -Infinity
  return Object.is(v, -0) ? "-0" : String(v);
}

export function formatKeyPart(part) {
  switch (part.type) {
    case "string":
      return JSON.stringify(part.value);
    case "number":
      return numberText(part.value);
    case "bigint":
      return `${part.value}n`;
    case "boolean":
      return String(part.value);
    case "Uint8Array":
      return `Uint8Array([${Array.from(decodeBase64(part.value)).join(", ")}])`;
    case "raw":
      return `raw:${part.value}`;
    default:
      return JSON.stringify(part);
  }
}

export function formatKey(key) {
  return `[${key.map(formatKeyPart).join(", ")}]`;
}

export function sameKey(a, b) {
  return a.length === b.length && a.every((p, i) => p.type === b[i].type &&
    formatKeyPart(p) === formatKeyPart(b[i]));
}

// Whether `key` starts with every part of `prefix`.
export function hasPrefix(key, prefix) {
  return key.length >= prefix.length && sameKey(key.slice(0, prefix.length), prefix);
}

export class KeySyntaxError extends Error {}

// Reads a key written in the syntax above. Throws KeySyntaxError with the position at fault.
export function parseKey(text) {
  const src = text.trim();
  if (src.startsWith("[") && src.includes("{")) {
    // Perhaps KvKeyJSON.
    try {
      const json = JSON.parse(src);
      if (Array.isArray(json) && json.every((p) => p && typeof p === "object" &&
        typeof p.type === "string" && "value" in p)) {
        return json.map((p) => ({ type: p.type, value: p.value }));
      }
    } catch {
      // not JSON; read it as key syntax below (which has no braces, so it fails clearly)
    }
  }
  let i = 0;
  const fail = (what) => {
    throw new KeySyntaxError(`${what} at position ${i + 1} of the key ${JSON.stringify(src)}`);
  };
  const ws = () => {
    while (i < src.length && /\s/.test(src[i])) i++;
  };
  const expect = (c) => {
    ws();
    if (src[i] !== c) fail(`expected "${c}"`);
    i++;
  };
  const word = (w) => {
    if (src.startsWith(w, i)) {
      i += w.length;
      return true;
    }
    return false;
  };
  const part = () => {
    ws();
    const c = src[i];
    if (c === '"') {
      let j = i + 1;
      while (j < src.length && src[j] !== '"') j += src[j] === "\\" ? 2 : 1;
      if (j >= src.length) fail("unterminated string");
      let value;
      try {
        value = JSON.parse(src.slice(i, j + 1));
      } catch {
        fail("bad string escape");
      }
      i = j + 1;
      return { type: "string", value };
    }
    if (word("true")) return { type: "boolean", value: true };
    if (word("false")) return { type: "boolean", value: false };
    if (word("NaN")) return { type: "number", value: "NaN" };
    if (word("Infinity")) return { type: "number", value: "Infinity" };
    if (word("-Infinity")) return { type: "number", value: "-Infinity" };
    if (word("raw:")) {
      const m = /^[A-Za-z0-9_-]+/.exec(src.slice(i));
      if (!m) fail("expected URL-safe base64 bytes after raw:");
      i += m[0].length;
      return { type: "raw", value: m[0] };
    }
    if (word("new Uint8Array") || word("Uint8Array")) {
      expect("(");
      expect("[");
      const bytes = [];
      ws();
      while (src[i] !== "]") {
        ws();
        const m = /^\d+/.exec(src.slice(i));
        if (!m || Number(m[0]) > 255) fail("expected a byte (0 to 255)");
        bytes.push(Number(m[0]));
        i += m[0].length;
        ws();
        if (src[i] === ",") i++;
        else if (src[i] !== "]") fail('expected "," or "]"');
        ws();
      }
      i++;
      expect(")");
      return { type: "Uint8Array", value: encodeBase64Url(bytes) };
    }
    const big = /^-?(0|[1-9]\d*)n/.exec(src.slice(i));
    if (big) {
      i += big[0].length;
      return { type: "bigint", value: big[0].slice(0, -1) };
    }
    const num = /^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?/.exec(src.slice(i));
    if (num) {
      i += num[0].length;
      return { type: "number", value: Number(num[0]) };
    }
    fail(c === "'" ? "strings need double quotes" : "expected a string, number, bigint, boolean, Uint8Array or raw:");
  };
  expect("[");
  const key = [];
  ws();
  if (src[i] === "]") {
    i++;
  } else {
    for (;;) {
      key.push(part());
      ws();
      if (src[i] === ",") {
        i++;
        ws();
        if (src[i] === "]") {  // a trailing comma
          i++;
          break;
        }
        continue;
      }
      if (src[i] === "]") {
        i++;
        break;
      }
      fail('expected "," or "]"');
    }
  }
  ws();
  if (i !== src.length) fail("unexpected text after the key");
  return key;
}

// --- Values -----------------------------------------------------------------------------------

// obj[k] = v, even for k "__proto__" (which JSON.parse makes an own property).
function setOwn(obj, k, v) {
  Object.defineProperty(obj, k, { value: v, enumerable: true, writable: true, configurable: true });
}

// The plain JSON of a KvValueJSON made only of null, booleans, finite numbers, strings, plain
// objects and arrays without holes: {ok: true, value}; otherwise {ok: false}.
export function typedToPlain(v) {
  const bad = { ok: false };
  if (v === null || typeof v !== "object") return bad;
  switch (v.type) {
    case "null":
      return { ok: true, value: null };
    case "boolean":
    case "string":
      return { ok: true, value: v.value };
    case "number":
      if (typeof v.value !== "number" || Object.is(v.value, -0)) return bad;
      return { ok: true, value: v.value };
    case "Array": {
      if (!Array.isArray(v.value) || "length" in v || "properties" in v) return bad;
      const out = [];
      for (const item of v.value) {
        const r = typedToPlain(item);
        if (!r.ok) return bad;
        out.push(r.value);
      }
      return { ok: true, value: out };
    }
    case "object": {
      const out = {};
      for (const [k, item] of Object.entries(v.value ?? {})) {
        const r = typedToPlain(item);
        if (!r.ok) return bad;
        setOwn(out, k, r.value);
      }
      return { ok: true, value: out };
    }
    default:
      return bad;
  }
}

// The KvValueJSON of plain JSON.
export function plainToTyped(x) {
  if (x === null) return { type: "null", value: null };
  if (Array.isArray(x)) return { type: "Array", value: x.map(plainToTyped) };
  switch (typeof x) {
    case "boolean":
      return { type: "boolean", value: x };
    case "number":
      return { type: "number", value: x };
    case "string":
      return { type: "string", value: x };
    case "object": {
      const value = {};
      for (const [k, item] of Object.entries(x)) setOwn(value, k, plainToTyped(item));
      return { type: "object", value };
    }
    default:
      throw new Error(`cannot store ${typeof x}`);
  }
}

const TYPED_ARRAY_SIZES = {
  Int8Array: 1, Uint8Array: 1, Uint8ClampedArray: 1, Int16Array: 2, Uint16Array: 2,
  Int32Array: 4, Uint32Array: 4, Float16Array: 2, Float32Array: 4, Float64Array: 8,
  BigInt64Array: 8, BigUint64Array: 8, ArrayBuffer: 1, DataView: 1,
};

function propertyName(k) {
  return /^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k);
}

// A short rendering of a KvValueJSON in the style of Deno.inspect, cut near `max` characters.
export function describeValue(v, max = 160) {
  let out = "";
  const put = (s) => {
    out += s;
    if (out.length > max) throw describeValue.full;
  };
  const walk = (x) => {
    if (x === null) {
      put("<empty>");  // an array hole
      return;
    }
    switch (x.type) {
      case "undefined":
        return put("undefined");
      case "null":
        return put("null");
      case "boolean":
        return put(String(x.value));
      case "number":
        return put(numberText(x.value));
      case "bigint":
        return put(`${x.value}n`);
      case "string":
        return put(JSON.stringify(x.value));
      case "KvU64":
        return put(`KvU64(${x.value}n)`);
      case "Date":
        return put(x.value === null ? "Invalid Date" : x.value);
      case "RegExp":
        return put(x.value);
      case "BooleanObject":
      case "NumberObject":
      case "BigIntObject":
      case "StringObject":
        put(`[${x.type.replace("Object", "")}: `);
        walk({ type: x.type.replace("Object", "").toLowerCase(), value: x.value });
        return put("]");
      case "ref":
        return put(`[Circular *${x.value}]`);
      case "v8":
        return put(`<V8 value, ${decodeBase64(x.value).length} bytes>`);
      case "HostObject":
        put("HostObject ");
        return walk(x.value);
      case "Array": {
        put("[");
        x.value.forEach((item, i) => {
          if (i) put(", ");
          walk(item);
        });
        return put("]");
      }
      case "object": {
        const entries = Object.entries(x.value ?? {});
        if (entries.length === 0) return put("{}");
        put("{ ");
        entries.forEach(([k, item], i) => {
          if (i) put(", ");
          put(`${propertyName(k)}: `);
          walk(item);
        });
        return put(" }");
      }
      case "Map":
      case "Set": {
        put(`${x.type}(${x.value.length}) {`);
        x.value.forEach((item, i) => {
          put(i ? ", " : " ");
          if (x.type === "Map") {
            walk(item[0]);
            put(" => ");
            walk(item[1]);
          } else {
            walk(item);
          }
        });
        return put(x.value.length ? " }" : "}");
      }
      default:
        if (x.type in TYPED_ARRAY_SIZES) {
          const bytes = typeof x.value === "string" ? decodeBase64(x.value) : null;
          if (x.type === "Uint8Array" && bytes) {
            return put(`Uint8Array(${bytes.length}) [${Array.from(bytes.slice(0, 32)).join(", ")}` +
              `${bytes.length > 32 ? ", ..." : ""}]`);
          }
          const n = bytes ? bytes.length / TYPED_ARRAY_SIZES[x.type] : "?";
          return put(`${x.type}(${n})`);
        }
        if (/Error$/.test(x.type)) {
          const message = x.value?.message;
          return put(`${x.type}${message ? `: ${message}` : ""}`);
        }
        return put(x.type);
    }
  };
  try {
    walk(v);
    return out;
  } catch (e) {
    if (e !== describeValue.full) throw e;
    return `${out.slice(0, max)}…`;
  }
}
describeValue.full = Symbol("full");

// A hex dump: offset, 16 bytes in hex, and their printable ASCII.
export function hexDump(bytes, maxBytes = 4096) {
  const lines = [];
  const n = Math.min(bytes.length, maxBytes);
  for (let off = 0; off < n; off += 16) {
    const row = bytes.slice(off, Math.min(off + 16, n));
    const hex = Array.from(row, (b) => b.toString(16).padStart(2, "0")).join(" ");
    const ascii = Array.from(row, (b) => (b >= 0x20 && b < 0x7f ? String.fromCharCode(b) : "."))
      .join("");
    lines.push(`${off.toString(16).padStart(8, "0")}  ${hex.padEnd(47)}  ${ascii}`);
  }
  if (bytes.length > n) lines.push(`… ${bytes.length - n} more bytes`);
  return lines.join("\n");
}

export function formatBytes(n) {
  if (n === null || n === undefined || Number.isNaN(n)) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let u = 0;
  let x = Number(n);
  while (x >= 1024 && u < units.length - 1) {
    x /= 1024;
    u++;
  }
  return u === 0 ? `${x} B` : `${x.toFixed(1)} ${units[u]}`;
}

// --- Time (expiry) ------------------------------------------------------------------------------

// "in 5 min", "in 2 h", "in 3 days", "2 min ago"; "never" for null.
export function relativeTime(iso, now = Date.now()) {
  if (!iso) return "never";
  const ms = Date.parse(iso) - now;
  if (Number.isNaN(ms)) return iso;
  const abs = Math.abs(ms);
  const units = [[86_400_000, "day"], [3_600_000, "h"], [60_000, "min"], [1000, "s"]];
  let text = "now";
  for (const [size, unit] of units) {
    if (abs >= size) {
      const n = Math.round(abs / size);
      text = unit === "day" ? `${n} day${n === 1 ? "" : "s"}` : `${n} ${unit}`;
      break;
    }
  }
  if (text === "now") return "now";
  return ms > 0 ? `in ${text}` : `${text} ago`;
}

// The milliseconds from now an "Expires" field asks for: null for never, or throws.
export function readExpiry(text, now = Date.now()) {
  const t = (text ?? "").trim();
  if (t === "" || /^never$/i.test(t)) return null;
  const m = /^(\d+(?:\.\d+)?)\s*(ms|s|sec|m|min|h|d|w)$/i.exec(t);
  let ms;
  if (m) {
    const unit = { ms: 1, s: 1000, sec: 1000, m: 60_000, min: 60_000, h: 3_600_000, d: 86_400_000, w: 604_800_000 }[m[2].toLowerCase()];
    ms = Number(m[1]) * unit;
  } else {
    const at = Date.parse(t);
    if (Number.isNaN(at)) {
      throw new Error(`Expires: "${t}" is neither "never", a delay like 10m or 2h, nor a time like 2030-01-02T03:04:05Z.`);
    }
    ms = at - now;
  }
  if (!(ms >= 1)) throw new Error(`Expires: ${t} is in the past.`);
  return Math.ceil(ms);
}
