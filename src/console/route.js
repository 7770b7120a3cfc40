// The console's place as a URL hash, so reload, Back and shared links work. Pure.
//
//   #/db/NAME/prefix/users/42n?open=["users", 42n, "x"]&view=all   the entries page
//   #/db/NAME/watch   #/db/NAME/transfer   #/db/NAME/queue   #/db/NAME/server
//   #/tokens                                                        (server-wide)
//
// Key parts are segments in the console's key syntax (kv.js), percent-encoded; a string is
// written bare when the bare text cannot be read as another part (users, not "users"), and in
// double quotes otherwise ("42", "true", "").

import { formatKey, formatKeyPart, parseKey } from "./kv.js";

export const DB_PAGES = ["entries", "watch", "transfer", "queue", "server"];
export const PAGES = [...DB_PAGES, "tokens"];

// One key part as a segment's text (before percent-encoding).
export function partSegment(part) {
  if (part.type === "string" && part.value !== "") {
    let other = true;
    try {
      parseKey(`[${part.value}]`);
    } catch {
      other = false;
    }
    if (!other) return part.value;
  }
  return formatKeyPart(part);
}

// The key part a segment's text names.
export function segmentPart(text) {
  try {
    const key = parseKey(`[${text}]`);
    if (key.length === 1) return key[0];
  } catch {
    // a bare string
  }
  return { type: "string", value: text };
}

// Percent-encoding that keeps the key syntax readable: quotes, commas and brackets stay.
const enc = (s) => encodeURIComponent(s).replace(/%22/g, '"').replace(/%2C/g, ",")
  .replace(/%5B/g, "[").replace(/%5D/g, "]");

// {page, db, prefix, open, view} -> "#/..."
export function formatRoute(route) {
  if (route.page === "tokens") return "#/tokens";
  if (!route.db) return "#/";
  const base = `#/db/${encodeURIComponent(route.db)}`;
  if (route.page !== "entries") return `${base}/${route.page}`;
  let out = `${base}/prefix${(route.prefix ?? []).map((p) => `/${enc(partSegment(p))}`).join("")}`;
  const query = [];
  if (route.view === "all") query.push("view=all");
  if (route.open) query.push(`open=${enc(formatKey(route.open))}`);
  if (query.length) out += `?${query.join("&")}`;
  return out;
}

// "#/..." -> {page, db, prefix, open, view}; null when the hash names no place (or a bad key).
export function parseRoute(hash) {
  const text = (hash ?? "").replace(/^#/, "");
  const q = text.indexOf("?");
  const path = q < 0 ? text : text.slice(0, q);
  const params = new URLSearchParams(q < 0 ? "" : text.slice(q + 1));
  const seg = path.split("/").filter((s) => s !== "").map((s) => decodeURIComponent(s));
  if (seg.length === 1 && seg[0] === "tokens") return { page: "tokens", db: null };
  if (seg[0] !== "db" || !seg[1]) return null;
  const db = seg[1];
  const page = seg[2] ?? "entries";
  if (page === "prefix" || page === "entries") {
    const open = params.get("open");
    return {
      page: "entries",
      db,
      prefix: seg.slice(3).map(segmentPart),
      view: params.get("view") === "all" ? "all" : "folders",
      open: open ? parseKey(open) : null,
    };
  }
  if (DB_PAGES.includes(page) && seg.length === 3) return { page, db };
  return null;
}
