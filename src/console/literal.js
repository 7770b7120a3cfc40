// Values in Deno literal syntax, the way a Deno program writes them, to and from KvValueJSON
// (src/codec/v8/v8_json.h). Pure; the parser is our own small recursive descent reader: nothing
// typed here is ever run as code.
//
//   "text" 'text'   42  -1.5e3  NaN  Infinity  -0   123n   true  false  null  undefined
//   [1, 2, 3]   { name: "Ada", "two words": 2 }
//   new Date("2024-05-06T07:08:09.000Z")   new Date(0)
//   new Map([["theme", "dark"], [1, 2]])   new Set(["a", "b"])
//   new Uint8Array([1, 2, 3])  (and the other typed arrays, by constructor name)
//   new RegExp("a+b", "gi")    new Error("message") (and TypeError, RangeError, ...)
//   new Deno.KvU64(7n)         (only as a whole value)
// Comments (// and /* */) and trailing commas are allowed.

import { decodeBase64, encodeBase64Url } from "./kv.js";

const ERRORS = ["Error", "EvalError", "RangeError", "ReferenceError", "SyntaxError", "TypeError",
  "URIError"];

// Typed arrays: element size, DataView getter/setter, and whether elements are bigints.
const VIEWS = {
  Int8Array: [1, "Int8"], Uint8Array: [1, "Uint8"], Uint8ClampedArray: [1, "Uint8"],
  Int16Array: [2, "Int16"], Uint16Array: [2, "Uint16"], Int32Array: [4, "Int32"],
  Uint32Array: [4, "Uint32"], Float32Array: [4, "Float32"], Float64Array: [8, "Float64"],
  BigInt64Array: [8, "BigInt64", true], BigUint64Array: [8, "BigUint64", true],
};

export class LiteralSyntaxError extends Error {}

// --- Writing ------------------------------------------------------------------------------------

function numberLiteral(v) {
  if (typeof v === "string") return v;  // NaN, Infinity, -Infinity
  return Object.is(v, -0) ? "-0" : String(v);
}

function propertyKey(k) {
  return /^[A-Za-z_$][\w$]*$/.test(k) ? k : JSON.stringify(k);
}

// The elements of a typed array's bytes (base64), as literal texts; null if not whole elements.
function viewElements(type, base64) {
  const [size, kind, big] = VIEWS[type];
  const bytes = decodeBase64(base64);
  if (bytes.length % size) return null;
  const dv = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  const out = [];
  for (let off = 0; off < bytes.length; off += size) {
    const x = dv[`get${kind}`](off, true);
    out.push(big ? `${x}n` : numberLiteral(x));
  }
  return out;
}

class Unwritable extends Error {}

// The literal text of a KvValueJSON, indented like Deno's formatter for multi-line values; null
// when the value has parts this syntax does not cover (shared references, holes, extra
// members, boxed primitives, buffers): edit those as KvValueJSON.
export function formatLiteral(value, { indent = 2, width = 72 } = {}) {
  const walk = (x, depth) => {
    if (x === null || typeof x !== "object") throw new Unwritable();
    const pad = " ".repeat(indent * (depth + 1));
    const end = " ".repeat(indent * depth);
    const list = (open, items, close) => {
      if (items.length === 0) return `${open}${close}`;
      const flat = `${open}${items.join(", ")}${close}`;
      if (flat.length <= width && !flat.includes("\n")) return flat;
      return `${open}\n${items.map((i) => pad + i).join(",\n")},\n${end}${close}`;
    };
    switch (x.type) {
      case "undefined": return "undefined";
      case "null": return "null";
      case "boolean": return String(x.value);
      case "number": return numberLiteral(x.value);
      case "bigint": return `${x.value}n`;
      case "string": return JSON.stringify(x.value);
      case "Date": return x.value === null ? "new Date(NaN)" : `new Date(${JSON.stringify(x.value)})`;
      case "RegExp": {
        const m = /^\/([\s\S]*)\/([a-z]*)$/.exec(x.value);
        if (!m) throw new Unwritable();
        return `new RegExp(${JSON.stringify(m[1])}${m[2] ? `, ${JSON.stringify(m[2])}` : ""})`;
      }
      case "Array": {
        if (!Array.isArray(x.value) || "length" in x || "properties" in x) throw new Unwritable();
        if (x.value.some((i) => i === null)) throw new Unwritable();
        return list("[", x.value.map((i) => walk(i, depth + 1)), "]");
      }
      case "object": {
        const items = Object.entries(x.value ?? {}).map(([k, v]) =>
          `${propertyKey(k)}: ${walk(v, depth + 1)}`);
        return items.length ? list("{ ", items, " }").replace(/^\{ \n/, "{\n")
          .replace(/,\n(\s*) \}$/, ",\n$1}") : "{}";
      }
      case "Map": {
        const items = x.value.map(([k, v]) => `[${walk(k, depth + 2)}, ${walk(v, depth + 2)}]`);
        return `new Map(${list("[", items, "]")})`;
      }
      case "Set":
        return `new Set(${list("[", x.value.map((i) => walk(i, depth + 1)), "]")})`;
      case "KvU64":
        if (depth !== 0) throw new Unwritable();
        return `new Deno.KvU64(${x.value}n)`;
      default:
        if (x.type in VIEWS) {
          if (typeof x.value !== "string" || "byteOffset" in x || "byteLength" in x ||
              "maxByteLength" in x || "lengthTracking" in x || "buffer" in x) {
            throw new Unwritable();
          }
          const items = viewElements(x.type, x.value);
          if (!items) throw new Unwritable();
          return `new ${x.type}(${list("[", items, "]")})`;
        }
        if (ERRORS.includes(x.type)) {
          const v = x.value ?? {};
          if (Object.keys(v).some((k) => k !== "message")) throw new Unwritable();
          return `new ${x.type}(${v.message === undefined ? "" : JSON.stringify(v.message)})`;
        }
        throw new Unwritable();
    }
  };
  try {
    return walk(value, 0);
  } catch (e) {
    if (e instanceof Unwritable) return null;
    throw e;
  }
}

// --- Reading ------------------------------------------------------------------------------------

// Reads `text` as one value in the syntax above and returns its KvValueJSON. Throws
// LiteralSyntaxError naming the line and column at fault.
export function parseLiteral(text) {
  let i = 0;
  const src = String(text);
  const where = (at) => {
    const before = src.slice(0, at);
    const line = before.split("\n").length;
    const col = at - before.lastIndexOf("\n");
    return `line ${line}, column ${col}`;
  };
  const fail = (what, at = i) => {
    throw new LiteralSyntaxError(`${what} at ${where(at)}`);
  };
  const ws = () => {
    for (;;) {
      while (i < src.length && /\s/.test(src[i])) i++;
      if (src.startsWith("//", i)) {
        const nl = src.indexOf("\n", i);
        i = nl < 0 ? src.length : nl + 1;
      } else if (src.startsWith("/*", i)) {
        const close = src.indexOf("*/", i + 2);
        if (close < 0) fail("unterminated comment");
        i = close + 2;
      } else {
        return;
      }
    }
  };
  const peek = () => {
    ws();
    return src[i];
  };
  const expect = (c) => {
    if (peek() !== c) fail(`expected "${c}"${i < src.length ? ` but found "${src[i]}"` : " but the text ended"}`);
    i++;
  };
  const identifier = () => {
    ws();
    const m = /^[A-Za-z_$][\w$]*/.exec(src.slice(i, i + 256));
    if (!m) return null;
    i += m[0].length;
    return m[0];
  };
  const string = () => {
    const quote = src[i];
    const start = i;
    i++;
    let out = "";
    for (;;) {
      if (i >= src.length) fail("unterminated string", start);
      const c = src[i++];
      if (c === quote) return out;
      if (quote === "`" && c === "$" && src[i] === "{") fail("template substitutions are not values", i - 1);
      if (c === "\n" && quote !== "`") fail("a line break inside a string (write \\n)", i - 1);
      if (c !== "\\") {
        out += c;
        continue;
      }
      const e = src[i++];
      const hex = (n) => {
        const h = src.slice(i, i + n);
        if (!new RegExp(`^[0-9a-fA-F]{${n}}$`).test(h)) fail("bad escape", i - 2);
        i += n;
        return parseInt(h, 16);
      };
      switch (e) {
        case "n": out += "\n"; break;
        case "t": out += "\t"; break;
        case "r": out += "\r"; break;
        case "b": out += "\b"; break;
        case "f": out += "\f"; break;
        case "v": out += "\v"; break;
        case "0": out += "\0"; break;
        case "x": out += String.fromCharCode(hex(2)); break;
        case "u":
          if (src[i] === "{") {
            const close = src.indexOf("}", i);
            const cp = close < 0 ? NaN : parseInt(src.slice(i + 1, close), 16);
            if (!(cp >= 0 && cp <= 0x10ffff)) fail("bad \\u{…} escape", i - 2);
            out += String.fromCodePoint(cp);
            i = close + 1;
          } else {
            out += String.fromCharCode(hex(4));
          }
          break;
        case "\r":
          if (src[i] === "\n") i++;
          break;
        case "\n": break;
        default:
          if (e === undefined) fail("unterminated string", start);
          out += e;
      }
    }
  };
  // A number or bigint after an optional sign; `sign` is "-" or "". Sticky expressions read at
  // `i` without copying the rest of the text (a long array stays linear).
  const readAt = (re) => {
    re.lastIndex = i;
    const m = re.exec(src);
    if (m) i += m[0].length;
    return m;
  };
  let sign = "";
  const bigint = (digits) => {
    const big = BigInt(digits.replace(/_/g, ""));
    return { type: "bigint", value: `${sign === "-" && big !== 0n ? "-" : ""}${big}` };
  };
  const number = (s) => {
    sign = s;
    let m = readAt(/(0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+)(n?)/y);
    if (m) {
      if (m[2]) return bigint(m[1]);
      return { type: "number", value: (sign === "-" ? -1 : 1) * Number(m[1].replace(/_/g, "")) };
    }
    m = readAt(/(\d[\d_]*)n/y);
    if (m) return bigint(m[1]);
    m = readAt(/(\d[\d_]*\.?[\d_]*|\.\d[\d_]*)([eE][+-]?\d+)?/y);
    if (!m) return null;
    const n = Number(`${sign}${m[0].replace(/_/g, "")}`);
    if (Number.isNaN(n)) fail("bad number");
    return { type: "number", value: n };
  };
  const items = (close, each) => {
    const out = [];
    for (;;) {
      if (peek() === close) {
        i++;
        return out;
      }
      out.push(each());
      const c = peek();
      if (c === ",") {
        i++;
      } else if (c !== close) {
        fail(`expected "," or "${close}"`);
      }
    }
  };
  // The argument list of a constructor: one array literal of values.
  const arrayArgument = (what) => {
    expect("(");
    if (peek() === ")") {
      i++;
      return [];
    }
    const at = i;
    const v = value(1);
    if (v.type !== "Array") fail(`${what} takes an array literal`, at);
    if (peek() === ",") i++;
    expect(")");
    return v.value;
  };
  const construct = (depth) => {
    ws();
    const at = i;
    let name = identifier();
    if (name === "Deno" && peek() === ".") {
      i++;
      name = `Deno.${identifier()}`;
    }
    if (!name) fail("expected a constructor name after new");
    if (name === "Date") {
      expect("(");
      const arg = peek() === ")" ? null : value(depth + 1);
      if (peek() === ",") fail("new Date takes one argument: an ISO date text or milliseconds");
      expect(")");
      let d;
      if (arg === null) d = new Date();
      else if (arg.type === "string") d = new Date(arg.value);
      else if (arg.type === "number") d = new Date(typeof arg.value === "number" ? arg.value : NaN);
      else fail("new Date takes a date text or milliseconds", at);
      return { type: "Date", value: Number.isNaN(d.getTime()) ? null : d.toISOString() };
    }
    if (name === "Map") {
      const pairs = arrayArgument("new Map");
      return {
        type: "Map",
        value: pairs.map((p) => {
          if (p.type !== "Array" || p.value.length !== 2) fail("each Map item is a [key, value] pair", at);
          return p.value;
        }),
      };
    }
    if (name === "Set") return { type: "Set", value: arrayArgument("new Set") };
    if (name in VIEWS) {
      const [size, kind, big] = VIEWS[name];
      const elements = arrayArgument(`new ${name}`);
      const bytes = new Uint8Array(elements.length * size);
      const dv = new DataView(bytes.buffer);
      elements.forEach((e, k) => {
        if (big) {
          if (e.type !== "bigint") fail(`${name} holds bigints (write 1n)`, at);
          dv[`set${kind}`](k * size, BigInt(e.value), true);
        } else {
          if (e.type !== "number") fail(`${name} holds numbers`, at);
          const n = typeof e.value === "number" ? e.value : Number(e.value);
          if (name === "Uint8Array" && !(Number.isInteger(n) && n >= 0 && n <= 255)) {
            fail("a Uint8Array holds bytes (0 to 255)", at);
          }
          dv[`set${kind}`](k * size, n, true);
        }
      });
      return { type: name, value: encodeBase64Url(bytes) };
    }
    if (name === "RegExp") {
      expect("(");
      const source = value(depth + 1);
      let flags = { type: "string", value: "" };
      if (peek() === ",") {
        i++;
        flags = value(depth + 1);
      }
      expect(")");
      if (source.type !== "string" || flags.type !== "string") fail("new RegExp takes texts", at);
      try {
        RegExp(source.value, flags.value);
      } catch (e) {
        fail(`not a regular expression (${e.message})`, at);
      }
      // As RegExp.prototype.source writes it: every unescaped "/" escaped.
      let escaped = "";
      for (let k = 0; k < source.value.length; k++) {
        const ch = source.value[k];
        if (ch === "\\") {
          escaped += ch + (source.value[k + 1] ?? "");
          k++;
        } else {
          escaped += ch === "/" ? "\\/" : ch;
        }
      }
      return { type: "RegExp", value: `/${escaped || "(?:)"}/${flags.value}` };
    }
    if (ERRORS.includes(name)) {
      expect("(");
      const msg = peek() === ")" ? null : value(depth + 1);
      expect(")");
      if (msg && msg.type !== "string") fail(`new ${name} takes a message text`, at);
      return { type: name, value: msg ? { message: msg.value } : {} };
    }
    if (name === "Deno.KvU64" || name === "KvU64") {
      if (depth !== 0) fail("a KvU64 can only be a whole value", at);
      expect("(");
      const n = value(depth + 1);
      expect(")");
      if (n.type !== "bigint" || n.value.startsWith("-") || BigInt(n.value) >= 2n ** 64n) {
        fail("new Deno.KvU64 takes a bigint from 0n to 2n ** 64n - 1n", at);
      }
      return { type: "KvU64", value: n.value };
    }
    fail(`unknown constructor ${name} (values can be Date, Map, Set, RegExp, errors, typed arrays, Deno.KvU64)`, at);
  };
  const value = (depth) => {
    if (depth > 200) fail("nested too deeply");
    const c = peek();
    if (c === undefined) fail("expected a value but the text ended");
    if (c === '"' || c === "'" || c === "`") return { type: "string", value: string() };
    if (c === "[") {
      i++;
      return { type: "Array", value: items("]", () => value(depth + 1)) };
    }
    if (c === "{") {
      i++;
      const obj = {};
      items("}", () => {
        const at = i;
        let key;
        const k = peek();
        if (k === '"' || k === "'") {
          key = string();
        } else if (/\d/.test(k)) {
          const n = number("");
          if (!n || n.type !== "number") fail("bad property name", at);
          key = String(n.value);
        } else {
          key = identifier();
          if (key === null) fail("expected a property name", at);
        }
        if (Object.prototype.hasOwnProperty.call(obj, key)) fail(`property ${JSON.stringify(key)} given twice`, at);
        expect(":");
        Object.defineProperty(obj, key, {
          value: value(depth + 1), enumerable: true, writable: true, configurable: true,
        });
        return null;
      });
      return { type: "object", value: obj };
    }
    if (c === "-" || c === "+") {
      i++;
      const sign = c === "-" ? "-" : "";
      ws();
      if (src.startsWith("Infinity", i)) {
        i += 8;
        return { type: "number", value: sign ? "-Infinity" : "Infinity" };
      }
      const n = number(sign);
      if (!n) fail("expected a number after the sign");
      return n;
    }
    if (/[\d.]/.test(c)) {
      const n = number("");
      if (!n) fail("bad number");
      return n;
    }
    const at = i;
    const word = identifier();
    switch (word) {
      case "true": return { type: "boolean", value: true };
      case "false": return { type: "boolean", value: false };
      case "null": return { type: "null", value: null };
      case "undefined": return { type: "undefined", value: null };
      case "NaN": return { type: "number", value: "NaN" };
      case "Infinity": return { type: "number", value: "Infinity" };
      case "new": return construct(depth);
      case null: fail(`unexpected "${c}"`, at);
      // falls through (fail throws)
      default:
        fail(`unknown name ${word}${/^(Map|Set|Date|Uint8Array|RegExp)$/.test(word) ? ` (write new ${word}(…))` : ""}`, at);
    }
    return null;
  };
  const v = value(0);
  ws();
  if (i < src.length) fail("unexpected text after the value");
  return v;
}
