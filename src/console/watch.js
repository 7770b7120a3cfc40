// The Watch page: a key or a prefix watched live through the admin API's Server-Sent Events.
// A stream that drops (the server restarts, a proxy cuts it, the network blinks) is opened
// again after a pause that grows from 1 s to 30 s, and says so; the first event after a
// reconnect carries the current state, so nothing is missed for a key watch. The watch keeps
// running while other pages are shown, until stopped or the database changes.

import { ApiError } from "./api.js";
import { $, clear, el, message } from "./dom.js";
import { noteChange } from "./entries.js";
import { describeValue, formatKey, parseKey } from "./kv.js";

const WATCH_ROWS = 200;                  // rows kept in the table
const RETRY_MS = [1000, 2000, 5000, 10_000, 30_000];

let shell = null;
let watch = null;  // {controller, key, mode, db, rows: Map, attempt, timer}

export function stop(status) {
  if (watch) {
    watch.controller.abort();
    clearTimeout(watch.timer);
  }
  watch = null;
  $("watch-stop").disabled = true;
  if (status) message($("watch-status"), status);
}

// Starts watching `key` (a key, or a prefix when mode is "prefix") in the current database.
export function start(key, mode) {
  $("watch-key").value = formatKey(key);
  $("watch-mode").value = mode;
  stop();
  watch = { key, mode, db: shell.db, rows: new Map(), attempt: 0, timer: 0, controller: null };
  clear($("watch-body"));
  $("watch-stop").disabled = false;
  connect(watch);
}

function describe(w) {
  return `${w.mode === "prefix" ? "keys under" : "key"} ${formatKey(w.key)} in ${w.db}`;
}

function connect(w) {
  if (watch !== w) return;
  w.controller = new AbortController();
  const selector = w.mode === "prefix" ? { prefix: w.key } : { keys: [w.key] };
  message($("watch-status"), w.attempt ? `Reconnecting to watch ${describe(w)}…` : `Connecting to watch ${describe(w)}…`);
  shell.api.watch(w.db, selector, {
    signal: w.controller.signal,
    onOpen: () => {
      if (watch !== w) return;
      const again = w.attempt > 0;
      w.attempt = 0;
      message($("watch-status"), `Watching ${describe(w)}.${again ? " Reconnected." : ""} Changes appear as they happen.`);
    },
    onEntries: (items) => {
      if (watch === w) for (const item of items) showItem(w, item);
    },
  }).then(() => retry(w, "The server ended the stream"), (e) => {
    if (e.name === "AbortError" || watch !== w) return;
    // A refusal (bad key, token revoked, database gone) will not get better by retrying.
    if (e instanceof ApiError && e.status >= 400 && e.status < 500 && e.status !== 408 && e.status !== 429) {
      stop("");
      shell.fail($("watch-status"), e, "Watch failed: ");
      return;
    }
    retry(w, e.message || String(e));
  });
}

function retry(w, why) {
  if (watch !== w) return;
  const wait = RETRY_MS[Math.min(w.attempt, RETRY_MS.length - 1)];
  w.attempt++;
  message($("watch-status"), `The watch of ${describe(w)} dropped (${why}); reconnecting in ` +
    `${Math.round(wait / 1000)} s (attempt ${w.attempt}).`, "error");
  w.timer = setTimeout(() => connect(w), wait);
}

function showItem(w, item) {
  const id = formatKey(item.key);
  const row = el("tr", { class: "watch-row", dataset: { key: id } },
    el("td", { class: "key", text: id }),
    el("td", { class: "preview", text: item.value ? describeValue(item.value, 300) : "(no entry)" }),
    el("td", { class: "stamp", text: item.versionstamp ?? "–" }),
    el("td", { class: "time", text: new Date().toLocaleTimeString() }));
  const old = w.rows.get(id);
  if (old) old.remove();
  w.rows.delete(id);
  w.rows.set(id, row);
  $("watch-body").prepend(row);
  row.classList.add("fresh");
  setTimeout(() => row.classList.remove("fresh"), 1500);
  while (w.rows.size > WATCH_ROWS) {
    const [first] = w.rows.keys();
    w.rows.get(first).remove();
    w.rows.delete(first);
  }
  if (w.db === shell.db) noteChange(item);
}

export function init(s) {
  shell = s;
  $("watch-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    try {
      start(parseKey($("watch-key").value), $("watch-mode").value);
    } catch (e) {
      message($("watch-status"), e.message, "error");
    }
  });
  $("watch-stop").addEventListener("click", () => stop("Stopped."));
}

export function enter() {
  // The watch (if any) has kept running; nothing to do.
}
