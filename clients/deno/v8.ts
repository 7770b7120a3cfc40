// V8 value bytes through Deno's `node:v8`. Its Serializer writes format 15 with V8's own
// tags for typed arrays (what Node and Deno both read); its deserializer reads formats 13..16.
import v8 from "node:v8";

/** V8 bytes of `value` (header included). Throws DataCloneError-like errors for values V8
 * cannot serialize (functions, symbols, class instances with private state). */
export function serialize(value: unknown): Uint8Array {
  const s = new v8.Serializer();
  s.writeHeader();
  s.writeValue(value);
  const buf = s.releaseBuffer();
  return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
}

/** The value of V8 bytes. Throws for bytes V8 cannot read. */
export function deserialize(bytes: Uint8Array): unknown {
  return v8.deserialize(bytes);
}
