// Key and byte encodings of the kvconnect queue API (docs/queues.md): Deno KV keys as
// KvKeyJSON text, bytes as URL-safe base64 without padding.

/** @typedef {string | number | bigint | boolean | Uint8Array} KvKeyPart */
/** @typedef {readonly KvKeyPart[]} KvKey */

/**
 * URL-safe base64 of `bytes`, without padding.
 * @param {Uint8Array} bytes
 * @returns {string}
 */
export function toBase64Url(bytes) {
  return Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength).toString("base64url");
}

/**
 * Bytes of URL-safe (or standard) base64, with or without padding.
 * @param {string} text
 * @returns {Uint8Array}
 */
export function fromBase64Url(text) {
  const buf = Buffer.from(text, "base64url");
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** JSON text of a number as KvKeyJSON writes it: NaN and the infinities as strings, -0 kept. */
function numberText(/** @type {number} */ n) {
  if (Number.isNaN(n)) return '"NaN"';
  if (n === Infinity) return '"Infinity"';
  if (n === -Infinity) return '"-Infinity"';
  return Object.is(n, -0) ? "-0" : JSON.stringify(n);
}

function partText(/** @type {KvKeyPart} */ part) {
  switch (typeof part) {
    case "string":
      return `{"type":"string","value":${JSON.stringify(part)}}`;
    case "number":
      return `{"type":"number","value":${numberText(part)}}`;
    case "bigint":
      return `{"type":"bigint","value":"${part.toString()}"}`;
    case "boolean":
      return `{"type":"boolean","value":${part}}`;
  }
  if (part instanceof Uint8Array) {
    return `{"type":"Uint8Array","value":"${toBase64Url(part)}"}`;
  }
  throw new TypeError(`Invalid key part: ${String(part)} (a key part is a string, number, ` +
    `bigint, boolean or Uint8Array)`);
}

/**
 * The KvKeyJSON text of `key`. Text rather than an object because JSON.stringify would
 * turn -0 into 0 and NaN into null.
 * Throws TypeError for a key that is not an array of key parts.
 * @param {KvKey} key
 * @returns {string}
 */
export function keyToJSONText(key) {
  if (!Array.isArray(key)) throw new TypeError("A key must be an array of key parts");
  return `[${key.map(partText).join(",")}]`;
}
