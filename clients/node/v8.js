// V8 value bytes through node:v8. The base Serializer class, not v8.serialize: that one writes
// typed arrays as Node host objects, which Deno cannot read; the base class writes V8's own
// tags. v8.deserialize reads both, and formats up to 15 (the server hands out 15).
import v8 from "node:v8";

/**
 * V8 bytes of `value` (header included). Throws for values V8 cannot serialize.
 * @param {unknown} value
 * @returns {Uint8Array}
 */
export function serialize(value) {
  const s = new v8.Serializer();
  s.writeHeader();
  s.writeValue(value);
  const buf = s.releaseBuffer();
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

/**
 * The value of V8 bytes. Throws for bytes V8 cannot read.
 * @param {Uint8Array} bytes
 * @returns {unknown}
 */
export function deserialize(bytes) {
  return v8.deserialize(bytes);
}
