// The kvconnect web console: sign in with an admin access token, pick a database, browse keys by
// prefix, view, edit (checked against the versionstamp as read), create and delete entries,
// watch keys or prefixes live, export and import NDJSON, and see the server's numbers.
// Everything goes through the admin JSON API (api.js); text reaches the page only as text nodes.

import { AdminClient, ApiError, fetchMetrics } from "./api.js";
import { $, clear, el, message, setText, show } from "./dom.js";
import {
  decodeBase64, describeValue, formatBytes, formatKey, formatKeyPart, hasPrefix, hexDump,
  parseKey, plainToTyped, sameKey, typedToPlain,
} from "./kv.js";

const PAGE = 50;             // entries per page
const EXPORT_PAGE = 500;     // entries per list call while exporting
const WATCH_ROWS = 200;      // rows kept in the watch table
const STATS_EVERY_MS = 10_000;
const TOKEN_KEY = "kvconnect.console.token";  // sessionStorage, only if the user asks
const DB_KEY = "kvconnect.console.database";  // sessionStorage; not a secret

const state = {
  api: null,          // AdminClient while signed in
  databases: [],      // the last database list
  db: null,           // selected database name
  prefix: [],         // KvKeyJSON being listed
  cursor: null,       // next page, or null
  listSeq: 0,         // ignores answers to superseded list requests
  current: null,      // {key, entry} open in the detail panel (entry null: none)
  watch: null,        // {controller, selector, rows: Map}
  statsTimer: 0,
};

// --- Errors -----------------------------------------------------------------------------------

// The text for an error, and whether it means the token no longer works.
function describeError(e) {
  if (e instanceof ApiError) {
    return e.status ? `${e.message} (HTTP ${e.status}${e.code ? `, ${e.code}` : ""})` : e.message;
  }
  return e?.message ?? String(e);
}

// A success message that goes away after a while (unless replaced meanwhile).
function flash(node, text) {
  message(node, text, "ok");
  setTimeout(() => {
    if (node.textContent === text) message(node, "");
  }, 10_000);
}

// Reports `e` on `node`; a rejected token signs out.
function fail(node, e, prefix = "") {
  if (e instanceof ApiError && e.status === 401) {
    signOut(`Signed out: the server no longer accepts this token. ${e.message}`);
    return;
  }
  message(node, `${prefix}${describeError(e)}`, "error");
}

// --- Sign in ----------------------------------------------------------------------------------

async function signIn(token, remember) {
  const api = new AdminClient(token);
  const list = await api.databases();  // proves the token (401/403 otherwise)
  state.api = api;
  if (remember) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
  show($("signin-view"), false);
  show($("app-view"));
  show($("session"));
  setDatabases(list.databases);
  const wanted = sessionStorage.getItem(DB_KEY);
  const names = list.databases.map((d) => d.name);
  const pick = names.includes(wanted) ? wanted : names.includes("default") ? "default" : names[0];
  if (pick) await selectDatabase(pick);
  else message($("list-message"), "This token sees no database.", "error");
  refreshStats();
  clearInterval(state.statsTimer);
  state.statsTimer = setInterval(refreshStats, STATS_EVERY_MS);
}

function signOut(why = "") {
  stopWatch("Not watching.");
  clearInterval(state.statsTimer);
  state.api = null;
  state.db = null;
  state.current = null;
  sessionStorage.removeItem(TOKEN_KEY);
  show($("app-view"), false);
  show($("session"), false);
  show($("detail"), false);
  show($("create"), false);
  clear($("entries-body"));
  show($("signin-view"));
  message($("signin-message"), why, why ? "error" : "");
  $("token-input").focus();
}

$("signin-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const input = $("token-input");
  const token = input.value.trim();
  if (!token) return;
  $("signin-button").disabled = true;
  message($("signin-message"), "Checking the token…");
  try {
    await signIn(token, $("remember").checked);
    input.value = "";
    message($("signin-message"), "");
  } catch (e) {
    state.api = null;
    const text = e instanceof ApiError && (e.status === 401 || e.status === 403)
      ? `The server refused this token: ${e.message}`
      : `Could not sign in: ${describeError(e)}`;
    message($("signin-message"), text, "error");
  } finally {
    $("signin-button").disabled = false;
  }
});

$("sign-out").addEventListener("click", () => signOut());

// --- Databases --------------------------------------------------------------------------------

function setDatabases(databases) {
  const names = (list) => list.map((d) => d.name).join("\n");
  const changed = names(databases) !== names(state.databases);
  state.databases = databases;
  if (changed) {  // rebuilding the options would close the menu if it is open
    const select = clear($("db-select"));
    for (const d of databases) select.append(el("option", { value: d.name, text: d.name }));
    if (state.db) select.value = state.db;
  }
  renderDatabaseFacts();
}

async function reloadDatabases() {
  try {
    setDatabases((await state.api.databases()).databases);
  } catch (e) {
    fail($("list-message"), e, "Could not list the databases: ");
  }
}

async function selectDatabase(name) {
  stopWatch("Not watching.");
  state.db = name;
  sessionStorage.setItem(DB_KEY, name);
  $("db-select").value = name;
  closeDetail();
  renderDatabaseFacts();
  await listPrefix([]);
}

$("db-select").addEventListener("change", (ev) => selectDatabase(ev.target.value));
$("db-refresh").addEventListener("click", async () => {
  await reloadDatabases();
  refreshStats();
});

function renderDatabaseFacts() {
  const facts = clear($("db-facts"));
  const d = state.databases.find((x) => x.name === state.db);
  if (!d) return;
  const rows = [
    ["Database", d.name], ["Id", d.id], ["Serving", d.serving ? "yes" : "no"],
    ["Keys", d.keys ?? "–"], ["Size", formatBytes(d.bytes)],
    ["Last versionstamp", d.versionstamp ?? "–"], ["Open watches", d.watchers ?? "–"],
    ["Created", d.created_at ?? "–"],
  ];
  for (const [k, v] of rows) facts.append(el("dt", { text: k }), el("dd", { text: String(v) }));
}

// --- Listing ----------------------------------------------------------------------------------

function renderBreadcrumb() {
  const nav = clear($("breadcrumb"));
  nav.append(el("button", {
    type: "button", class: "crumb", text: "(all keys)", title: "List every key",
    on: { click: () => listPrefix([]) },
  }));
  state.prefix.forEach((part, i) => {
    nav.append(el("span", { class: "sep", text: "/" }));
    nav.append(el("button", {
      type: "button", class: "crumb", text: formatKeyPart(part),
      title: `List keys under ${formatKey(state.prefix.slice(0, i + 1))}`,
      on: { click: () => listPrefix(state.prefix.slice(0, i + 1)) },
    }));
  });
  $("prefix-input").value = formatKey(state.prefix);
}

// A table row for an entry: the key's parts (those past the prefix descend into it), a short
// value, the versionstamp and an Open button.
function entryRow(entry, { self = false } = {}) {
  const keyCell = el("td", { class: "key" });
  entry.key.forEach((part, i) => {
    if (i) keyCell.append(el("span", { class: "sep", text: ", " }));
    if (i < state.prefix.length) {
      keyCell.append(el("span", { class: "part dim", text: formatKeyPart(part) }));
    } else {
      keyCell.append(el("button", {
        type: "button", class: "part", text: formatKeyPart(part),
        title: `List keys under ${formatKey(entry.key.slice(0, i + 1))}`,
        on: { click: () => listPrefix(entry.key.slice(0, i + 1)) },
      }));
    }
  });
  if (self) keyCell.append(el("span", { class: "badge", text: "this prefix" }));
  return el("tr", { class: "entry-row", dataset: { key: formatKey(entry.key) } },
    keyCell,
    el("td", { class: "preview", text: describeValue(entry.value, 120) }),
    el("td", { class: "stamp", text: entry.versionstamp }),
    el("td", {}, el("button", {
      type: "button", class: "open", text: "Open", "aria-label": `Open ${formatKey(entry.key)}`,
      on: { click: () => openEntry(entry.key) },
    })));
}

async function listPrefix(prefix) {
  state.prefix = prefix;
  state.cursor = null;
  renderBreadcrumb();
  clear($("entries-body"));
  await loadPage(false);
}

async function loadPage(more) {
  const seq = ++state.listSeq;
  const db = state.db;
  const prefix = state.prefix;
  setText($("list-status"), "Loading…");
  try {
    const request = { prefix, limit: PAGE };
    if (more && state.cursor) request.cursor = state.cursor;
    // Deno lists keys strictly under a prefix; the entry at the prefix itself is read apart.
    const [page, self] = await Promise.all([
      state.api.list(db, request),
      !more && prefix.length ? state.api.get(db, prefix) : Promise.resolve(null),
    ]);
    if (seq !== state.listSeq || db !== state.db) return;
    if ($("list-message").classList.contains("error")) message($("list-message"), "");
    const body = $("entries-body");
    if (!more) clear(body);
    if (self) body.append(entryRow(self, { self: true }));
    for (const entry of page.entries) body.append(entryRow(entry));
    state.cursor = page.cursor;
    show($("list-more"), Boolean(page.cursor));
    const shown = body.querySelectorAll("tr").length;
    setText($("list-status"), shown === 0
      ? `No entries under ${formatKey(prefix)}.`
      : `${shown} entr${shown === 1 ? "y" : "ies"}${page.cursor ? " (more below)" : ""}`);
  } catch (e) {
    if (seq !== state.listSeq) return;
    setText($("list-status"), "");
    fail($("list-message"), e, "Could not list the entries: ");
  }
}

$("prefix-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("prefix-input").value.trim();
  try {
    listPrefix(text ? parseKey(text) : []);
  } catch (e) {
    message($("list-message"), e.message, "error");
  }
});
$("list-reload").addEventListener("click", () => listPrefix(state.prefix));
$("list-more").addEventListener("click", () => loadPage(true));
$("watch-prefix").addEventListener("click", () => startWatch(state.prefix, "prefix"));

// --- One entry --------------------------------------------------------------------------------

function closeDetail() {
  state.current = null;
  show($("detail"), false);
}

// Text for the editor: plain JSON when the value is plain JSON, else KvValueJSON.
function editorText(value, format) {
  if (format === "plain") {
    const plain = typedToPlain(value);
    if (plain.ok) return JSON.stringify(plain.value, null, 2);
  }
  return JSON.stringify(value, null, 2);
}

// The KvValueJSON in an editor's text, or throws with a message for the user.
function readEditor(text, format) {
  let json;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new Error(`The value is not valid JSON: ${e.message}`);
  }
  if (format === "plain") return plainToTyped(json);
  if (!json || typeof json !== "object" || typeof json.type !== "string") {
    throw new Error('A KvValueJSON is an object like {"type": "string", "value": "text"}.');
  }
  return json;
}

function renderEntry() {
  const { key, entry } = state.current;
  setText($("detail-key"), formatKey(key));
  message($("detail-notice"), "");
  show($("detail-raw"), false);
  $("detail-raw-button").disabled = !entry;
  $("edit-save").disabled = !entry;
  $("edit-delete").disabled = !entry;
  resetDelete();
  if (!entry) {
    setText($("detail-versionstamp"), "–");
    setText($("detail-expires"), "–");
    setText($("detail-preview"), "No entry has this key (it was deleted, or never written).");
    setText($("detail-json"), "");
    $("edit-value").value = "";
    return;
  }
  setText($("detail-versionstamp"), entry.versionstamp);
  setText($("detail-expires"), entry.expires_at ?? "never");
  setText($("detail-preview"), describeValue(entry.value, 2000));
  setText($("detail-json"), JSON.stringify(entry.value, null, 2));
  const plain = typedToPlain(entry.value).ok;
  $("edit-format").value = plain ? "plain" : "typed";
  $("edit-value").value = editorText(entry.value, $("edit-format").value);
}

async function openEntry(key, { keepMessage = false } = {}) {
  show($("create"), false);
  try {
    const entry = await state.api.get(state.db, key);
    state.current = { key, entry };
    renderEntry();
    if (!keepMessage) message($("detail-message"), "");
    show($("detail"));
  } catch (e) {
    fail($("list-message"), e, "Could not read the entry: ");
  }
}

$("detail-reload").addEventListener("click", () => openEntry(state.current.key));
$("detail-watch").addEventListener("click", () => startWatch(state.current.key, "key"));

$("detail-raw-button").addEventListener("click", async () => {
  const raw = $("detail-raw");
  try {
    const entry = await state.api.get(state.db, state.current.key, true);
    if (!entry) {
      setText(raw, "No entry has this key any more.");
    } else {
      const bytes = decodeBase64(entry.raw.bytes);
      setText(raw, `encoding: ${entry.raw.encoding}, ${bytes.length} bytes` +
        `${entry.versionstamp !== state.current.entry?.versionstamp
          ? ` (versionstamp ${entry.versionstamp}, newer than the value shown)` : ""}\n` +
        `base64url: ${entry.raw.bytes}\n\n${hexDump(bytes)}`);
    }
    show(raw);
  } catch (e) {
    fail($("detail-message"), e, "Could not read the raw bytes: ");
  }
});

$("edit-format").addEventListener("change", (ev) => {
  // Converts the text being edited when it can; otherwise leaves it for the user.
  const to = ev.target.value;
  const from = to === "plain" ? "typed" : "plain";
  try {
    const value = readEditor($("edit-value").value, from);
    if (to === "plain" && !typedToPlain(value).ok) {
      message($("detail-message"), "This value has types plain JSON cannot hold; " +
        "edit it as KvValueJSON.", "error");
      ev.target.value = "typed";
      return;
    }
    $("edit-value").value = editorText(value, to);
  } catch {
    // left as typed
  }
});

const CONFLICT_TEXT = (stamp) =>
  `Conflict: not saved. Someone else changed this entry after you opened it (you read ` +
  `versionstamp ${stamp}). Nothing was overwritten and your text is still in the editor. ` +
  `Reload the entry to see the current value, then apply your change again.`;

$("edit-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const current = state.current;
  if (!current?.entry) return;
  const out = $("detail-message");
  let value;
  try {
    value = readEditor($("edit-value").value, $("edit-format").value);
  } catch (e) {
    message(out, e.message, "error");
    return;
  }
  $("edit-save").disabled = true;
  message(out, "Saving…");
  try {
    const res = await state.api.set(state.db, current.key, value,
      { versionstamp: current.entry.versionstamp });
    await openEntry(current.key, { keepMessage: true });
    message(out, `Saved. New versionstamp ${res.versionstamp}.`, "ok");
    refreshListSoon();
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) {
      message(out, CONFLICT_TEXT(current.entry.versionstamp), "conflict");
    } else {
      fail(out, e, "Not saved: ");
    }
  } finally {
    $("edit-save").disabled = !state.current?.entry;
  }
});

// Delete asks once more on the same button.
let deleteTimer = 0;
function resetDelete() {
  clearTimeout(deleteTimer);
  const b = $("edit-delete");
  b.dataset.armed = "";
  b.textContent = "Delete";
}

$("edit-delete").addEventListener("click", async () => {
  const b = $("edit-delete");
  const current = state.current;
  if (!current?.entry) return;
  if (!b.dataset.armed) {
    b.dataset.armed = "1";
    b.textContent = "Click again to delete";
    deleteTimer = setTimeout(resetDelete, 5000);
    return;
  }
  resetDelete();
  const out = $("detail-message");
  try {
    await state.api.remove(state.db, current.key, current.entry.versionstamp);
    closeDetail();
    await listPrefix(state.prefix);
    flash($("list-message"), `Deleted ${formatKey(current.key)}.`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) {
      message(out, `Conflict: not deleted. Someone else changed this entry after you opened it ` +
        `(you read versionstamp ${current.entry.versionstamp}). Reload it and decide again.`,
      "conflict");
    } else {
      fail(out, e, "Not deleted: ");
    }
  }
});

// Reloads the first page of the listing shortly (once for a burst of changes); a listing grown
// by "Load more" is left alone, so the rows the user paged to stay.
let listTimer = 0;
function refreshListSoon() {
  if ($("entries-body").children.length > PAGE + 1) return;
  clearTimeout(listTimer);
  listTimer = setTimeout(() => loadPage(false), 200);
}

// --- New entry --------------------------------------------------------------------------------

$("new-entry").addEventListener("click", () => {
  closeDetail();
  $("create-key").value = state.prefix.length
    ? formatKey([...state.prefix, { type: "string", value: "" }]) : "";
  $("create-value").value = "";
  message($("create-message"), "");
  show($("create"));
  $("create-key").focus();
});
$("create-cancel").addEventListener("click", () => show($("create"), false));

$("create-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const out = $("create-message");
  let key;
  let value;
  try {
    key = parseKey($("create-key").value);
    if (key.length === 0) throw new Error("A key needs at least one part.");
    value = readEditor($("create-value").value, $("create-format").value);
  } catch (e) {
    message(out, e.message, "error");
    return;
  }
  try {
    const absent = $("create-absent").checked;
    await state.api.set(state.db, key, value, absent ? { versionstamp: null } : {});
    show($("create"), false);
    await openEntry(key);
    message($("detail-message"), "Created.", "ok");
    refreshListSoon();
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) {
      message(out, "Not created: an entry with this key already exists. Nothing was written.",
        "conflict");
    } else {
      fail(out, e, "Not created: ");
    }
  }
});

// --- Watch ------------------------------------------------------------------------------------

function stopWatch(status) {
  if (state.watch) state.watch.controller.abort();
  state.watch = null;
  $("watch-stop").disabled = true;
  if (status) message($("watch-status"), status);
}

function startWatch(key, mode) {
  $("watch-key").value = formatKey(key);
  $("watch-mode").value = mode;
  beginWatch(key, mode);
}

function beginWatch(key, mode) {
  stopWatch();
  const selector = mode === "prefix" ? { prefix: key } : { keys: [key] };
  const watch = { controller: new AbortController(), rows: new Map() };
  state.watch = watch;
  clear($("watch-body"));
  $("watch-stop").disabled = false;
  const what = `${mode === "prefix" ? "keys under" : "key"} ${formatKey(key)} in ${state.db}`;
  message($("watch-status"), `Connecting to watch ${what}…`);
  state.api.watch(state.db, selector, {
    signal: watch.controller.signal,
    onOpen: () => {
      if (state.watch === watch) message($("watch-status"), `Watching ${what}. Changes appear as they happen.`);
    },
    onEntries: (items) => {
      if (state.watch === watch) for (const item of items) showWatchItem(watch, item);
    },
  }).then(() => {
    if (state.watch === watch) stopWatch(`The server ended the watch of ${what}.`);
  }, (e) => {
    if (e.name === "AbortError" || state.watch !== watch) return;
    stopWatch("");
    fail($("watch-status"), e, "Watch failed: ");
  });
}

function showWatchItem(watch, item) {
  const id = formatKey(item.key);
  const row = el("tr", { class: "watch-row", dataset: { key: id } },
    el("td", { class: "key", text: id }),
    el("td", { class: "preview", text: item.value ? describeValue(item.value, 200) : "(no entry)" }),
    el("td", { class: "stamp", text: item.versionstamp ?? "–" }),
    el("td", { class: "time", text: new Date().toLocaleTimeString() }));
  const old = watch.rows.get(id);
  if (old) old.remove();
  watch.rows.set(id, row);
  $("watch-body").prepend(row);
  row.classList.add("fresh");
  setTimeout(() => row.classList.remove("fresh"), 1500);
  while (watch.rows.size > WATCH_ROWS) {
    const [first] = watch.rows.keys();
    watch.rows.get(first).remove();
    watch.rows.delete(first);
  }
  // The open entry changed elsewhere: say so before the user tries to save over it.
  const current = state.current;
  if (current && sameKey(current.key, item.key) &&
      (item.versionstamp ?? null) !== (current.entry?.versionstamp ?? null)) {
    message($("detail-notice"), item.versionstamp
      ? `This entry changed elsewhere (now versionstamp ${item.versionstamp}); saving your edit ` +
        "would be refused. Reload it to see the new value."
      : "This entry was deleted elsewhere.", "conflict");
  }
  if (hasPrefix(item.key, state.prefix)) refreshListSoon();
}

$("watch-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  try {
    beginWatch(parseKey($("watch-key").value), $("watch-mode").value);
  } catch (e) {
    message($("watch-status"), e.message, "error");
  }
});
$("watch-stop").addEventListener("click", () => stopWatch("Stopped."));

// --- Export and import ------------------------------------------------------------------------

$("export-button").addEventListener("click", async () => {
  const out = $("transfer-message");
  const db = state.db;
  const prefix = state.prefix;
  const lines = [];
  try {
    let cursor = null;
    do {
      const request = { prefix, limit: EXPORT_PAGE };
      if (cursor) request.cursor = cursor;
      const page = await state.api.list(db, request);
      for (const e of page.entries) {
        const line = { key: e.key, value: e.value, versionstamp: e.versionstamp };
        if (e.expires_at) line.expires_at = e.expires_at;
        lines.push(JSON.stringify(line));
      }
      cursor = page.cursor;
      message(out, `Exporting… ${lines.length} entries`);
    } while (cursor);
    const blob = new Blob(lines.map((l) => `${l}\n`), { type: "application/x-ndjson" });
    const stamp = new Date().toISOString().replace(/[-:]/g, "").replace(/\..*$/, "");
    const name = `kvconnect-${db}-${stamp}.ndjson`;
    const url = URL.createObjectURL(blob);
    el("a", { href: url, download: name }).click();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
    message(out, `Exported ${lines.length} entries under ${formatKey(prefix)} ` +
      `(${formatBytes(blob.size)}) as ${name}.`, "ok");
  } catch (e) {
    fail(out, e, "Export failed: ");
  }
});

$("import-button").addEventListener("click", async () => {
  const out = $("transfer-message");
  const file = $("import-file").files[0];
  if (!file) {
    message(out, "Choose an NDJSON file first.", "error");
    return;
  }
  const db = state.db;
  const skip = $("import-skip").checked;
  const lines = (await file.text()).split("\n");
  let written = 0;
  let skipped = 0;
  const failures = [];
  for (let i = 0; i < lines.length; i++) {
    const text = lines[i].trim();
    if (!text) continue;
    try {
      const entry = JSON.parse(text);
      if (!Array.isArray(entry.key) || !entry.value || typeof entry.value !== "object") {
        throw new Error('each line needs "key" (KvKeyJSON) and "value" (KvValueJSON)');
      }
      let expireIn;
      if (entry.expires_at) {
        expireIn = Date.parse(entry.expires_at) - Date.now();
        if (!(expireIn > 0)) {
          skipped++;  // already expired
          continue;
        }
      }
      await state.api.set(db, entry.key, entry.value,
        { versionstamp: skip ? null : undefined, expireIn: expireIn && Math.ceil(expireIn) });
      written++;
    } catch (e) {
      if (e instanceof ApiError && e.status === 409) {
        skipped++;
      } else if (e instanceof ApiError && e.status === 401) {
        fail(out, e);
        return;
      } else {
        failures.push(`line ${i + 1}: ${describeError(e)}`);
      }
    }
    if ((written + skipped) % 50 === 0) message(out, `Importing… ${written} written`);
  }
  const summary = `Imported ${file.name} into ${db}: ${written} written, ${skipped} skipped` +
    `, ${failures.length} failed.`;
  message(out, failures.length ? `${summary} ${failures.slice(0, 5).join("; ")}` : summary,
    failures.length ? "error" : "ok");
  await listPrefix(state.prefix);
});

// --- Server numbers ---------------------------------------------------------------------------

async function refreshStats() {
  if (!state.api) return;
  const status = $("stats-status");
  const [, metrics] = await Promise.allSettled([reloadDatabases(), fetchMetrics(state.api.token)]);
  if (metrics.status === "rejected") {
    setText(status, `/metrics is not available here (${describeError(metrics.reason)}); ` +
      "the numbers above come from the database list.");
    return;
  }
  const samples = metrics.value;
  const sum = (name, where = () => true) => samples
    .filter((s) => s.name === name && where(s.labels)).reduce((a, s) => a + s.value, 0);
  const facts = clear($("server-facts"));
  const rows = [
    ["Requests", sum("kvconnect_http_requests_total")],
    ["Requests failed (5xx)", sum("kvconnect_http_requests_total", (l) => l.code === "5xx")],
    ["Commit groups", sum("kvconnect_commit_groups_total")],
    ["Committed writes", sum("kvconnect_committed_writes_total")],
    ["Watch subscriptions", sum("kvconnect_watch_subscriptions")],
    ["Open connections", sum("kvconnect_connections_open")],
  ];
  for (const [k, v] of rows) {
    facts.append(el("dt", { text: k }), el("dd", { text: v.toLocaleString("en-US") }));
  }
  const body = clear($("stats-body"));
  const names = [...new Set(samples.filter((s) => s.name === "kvconnect_database_keys")
    .map((s) => s.labels.database))].sort();
  for (const name of names) {
    const of = (metric) => sum(metric, (l) => l.database === name);
    body.append(el("tr", {},
      el("td", { text: name }),
      el("td", { text: of("kvconnect_database_keys").toLocaleString("en-US") }),
      el("td", { text: formatBytes(of("kvconnect_database_bytes")) }),
      el("td", { text: of("kvconnect_watch_subscriptions").toLocaleString("en-US") })));
  }
  setText(status, `Updated ${new Date().toLocaleTimeString()} from /metrics.`);
}

$("stats-refresh").addEventListener("click", refreshStats);

// --- Start ------------------------------------------------------------------------------------

async function start() {
  const saved = sessionStorage.getItem(TOKEN_KEY);
  if (saved) {
    try {
      await signIn(saved, true);
      return;
    } catch (e) {
      sessionStorage.removeItem(TOKEN_KEY);
      signOut(`Please sign in again: ${describeError(e)}`);
      return;
    }
  }
  signOut();
}

start();
