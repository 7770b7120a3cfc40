// Key and byte encodings of the kvconnect queue API (docs/queues.md): Deno KV keys as
// KvKeyJSON text, bytes as URL-safe base64 without padding.

/** A part of a Deno KV key. */
export type KvKeyPart = string | number | bigint | boolean | Uint8Array;
/** A Deno KV key. */
export type KvKey = readonly KvKeyPart[];

/** URL-safe base64 of `bytes`, without padding. */
export function toBase64Url(bytes: Uint8Array): string {
  let binary = "";
  for (let i = 0; i < bytes.length; i += 0x8000) {
    binary += String.fromCharCode(...bytes.subarray(i, i + 0x8000));
  }
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/** Bytes of URL-safe (or standard) base64, with or without padding. */
export function fromBase64Url(text: string): Uint8Array {
  const std = text.replaceAll("-", "+").replaceAll("_", "/");
  const binary = atob(std + "=".repeat((4 - (std.length % 4)) % 4));
  const out = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) out[i] = binary.charCodeAt(i);
  return out;
}

/** JSON text of a number as KvKeyJSON writes it: NaN and the infinities as strings, -0 kept. */
function numberText(n: number): string {
  if (Number.isNaN(n)) return '"NaN"';
  if (n === Infinity) return '"Infinity"';
  if (n === -Infinity) return '"-Infinity"';
  return Object.is(n, -0) ? "-0" : JSON.stringify(n);
}

function partText(part: KvKeyPart): string {
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
 */
export function keyToJSONText(key: KvKey): string {
  if (!Array.isArray(key)) throw new TypeError("A key must be an array of key parts");
  return `[${key.map(partText).join(",")}]`;
}
