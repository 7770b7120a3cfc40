// The V8 codec @deno/kv gets in the Node tests. Node 20's V8 reads serialization format <= 15;
// Deno 2.9 writes 16. kvconnect serves Deno's values as 15 (--portable-v8-values,
// cross_runtime.test.mjs); where nothing does (E2E_LOCAL_BACKEND=1), decodeV8 relabels 16 as 15
// (the tags of storable values are the same).
import v8 from "node:v8";

export function decodeV8(bytes) {
  if (bytes[0] === 0xff && bytes[1] === 0x10) {
    const copy = Uint8Array.from(bytes);
    copy[1] = 0x0f;
    return v8.deserialize(copy);
  }
  return v8.deserialize(bytes);
}

/** Options for @deno/kv's openKv: { encodeV8, decodeV8 }. */
export const nodeV8Codec = { encodeV8: v8.serialize, decodeV8 };
