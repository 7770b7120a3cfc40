// The Entries page: keys browsed as folders (the distinct next key parts under the prefix, with
// their entry counts, from entries/children), or every entry under the prefix (entries/list);
// one-line rows; the entry open in a side panel (a drawer on narrow screens) with its value as
// a tree, raw bytes, and an editor in Deno literal syntax (literal.js) or KvValueJSON, with
// the expiry. Saves and deletes carry the versionstamp read, so a concurrent write is refused
// (409) and said so without overwriting.

import { ApiError } from "./api.js";
import { $, clear, el, message, setText, show } from "./dom.js";
import {
  decodeBase64, describeValue, formatKey, formatKeyPart, hasPrefix, hexDump, parseKey,
  readExpiry, relativeTime, sameKey,
} from "./kv.js";
import { formatLiteral, parseLiteral } from "./literal.js";
import { valueTree } from "./tree.js";

const FOLDER_PAGE = 100;  // key parts per page
const LIST_PAGE = 50;     // entries per page in the "all entries" view

let shell = null;
const state = {
  db: null,
  prefix: [],
  view: "folders",
  cursor: null,
  listSeq: 0,
  current: null,  // {key, entry} open in the panel (entry null: none)
  shown: 0,       // rows in the table
  forceRelist: false,
};

// --- Values in the editor ---------------------------------------------------------------------

// The KvValueJSON in an editor's text, or throws with a message for the user.
function readEditor(text, format) {
  if (format === "literal") {
    try {
      return parseLiteral(text);
    } catch (e) {
      throw new Error(`Not a value: ${e.message}.`);
    }
  }
  let json;
  try {
    json = JSON.parse(text);
  } catch (e) {
    throw new Error(`The value is not valid JSON: ${e.message}`);
  }
  if (!json || typeof json !== "object" || typeof json.type !== "string") {
    throw new Error('A KvValueJSON is an object like {"type": "string", "value": "text"}.');
  }
  return json;
}

// --- Navigation -------------------------------------------------------------------------------

function routeFor(changes) {
  return shell.formatRoute({
    page: "entries", db: state.db, prefix: state.prefix, view: state.view,
    open: state.current?.key ?? null, ...changes,
  });
}

const goPrefix = (prefix) => shell.navigate(routeFor({ prefix, open: null }));
const goOpen = (key) => shell.navigate(routeFor({ open: key }));

// --- Listing ----------------------------------------------------------------------------------

function renderBreadcrumb() {
  const nav = clear($("breadcrumb"));
  nav.append(el("a", {
    class: "crumb", text: "(all keys)", title: "The top of the key tree",
    href: routeFor({ prefix: [], open: null }),
  }));
  state.prefix.forEach((part, i) => {
    nav.append(el("span", { class: "sep", text: "/" }));
    nav.append(el("a", {
      class: "crumb", text: formatKeyPart(part),
      title: `Keys under ${formatKey(state.prefix.slice(0, i + 1))}`,
      href: routeFor({ prefix: state.prefix.slice(0, i + 1), open: null }),
    }));
  });
  $("prefix-input").value = formatKey(state.prefix);
  $("view-folders").setAttribute("aria-pressed", String(state.view === "folders"));
  $("view-flat").setAttribute("aria-pressed", String(state.view === "all"));
}

function openButton(key) {
  return el("button", {
    type: "button", class: "open small", text: "Open", "aria-label": `Open ${formatKey(key)}`,
    on: { click: () => goOpen(key) },
  });
}

function valueCell(entry) {
  if (!entry) return el("td", { class: "preview muted", text: "" });
  const text = describeValue(entry.value, 300);
  return el("td", { class: "preview", title: text.length > 60 ? text.slice(0, 1000) : null, text });
}

function markOpen(row, key) {
  if (state.current && sameKey(state.current.key, key)) row.classList.add("selected");
}

// A row of the folders view: one next key part.
function childRow(child) {
  const key = [...state.prefix, child.part];
  const folder = child.count_capped || child.count > (child.has_value ? 1 : 0);
  const count = `${child.count.toLocaleString("en-US")}${child.count_capped ? "+" : ""}`;
  const part = el("button", {
    type: "button", class: `part${folder ? " folder" : ""}`, text: formatKeyPart(child.part),
    title: folder ? `Keys under ${formatKey(key)}` : `Open ${formatKey(key)}`,
    on: { click: () => (folder ? goPrefix(key) : goOpen(key)) },
  });
  const row = el("tr", { class: `entry-row${folder ? " folder-row" : ""}`, dataset: { key: formatKey(key) } },
    el("td", { class: "key" }, folder ? el("span", { class: "icon", text: "▸", "aria-hidden": "true" }) : null, part),
    el("td", { class: "count num", title: folder ? `${count} entries under this key` : null, text: folder ? count : "" }),
    valueCell(child.entry),
    el("td", { class: "stamp", title: child.entry?.versionstamp, text: child.entry?.versionstamp ?? "" }),
    el("td", { class: "act" }, child.has_value ? openButton(key) : null));
  markOpen(row, key);
  return row;
}

// A row of the all-entries view (and the entry at the prefix itself): the key's parts past
// the prefix descend into it.
function entryRow(entry, { self = false } = {}) {
  const keyCell = el("td", { class: "key" });
  entry.key.forEach((part, i) => {
    if (i < state.prefix.length) {
      if (self && i === state.prefix.length - 1) keyCell.append(el("span", { class: "part dim", text: formatKeyPart(part) }));
      return;
    }
    if (i > state.prefix.length) keyCell.append(el("span", { class: "sep", text: ", " }));
    keyCell.append(el("button", {
      type: "button", class: "part", text: formatKeyPart(part),
      title: `Keys under ${formatKey(entry.key.slice(0, i + 1))}`,
      on: { click: () => goPrefix(entry.key.slice(0, i + 1)) },
    }));
  });
  if (self) keyCell.append(el("span", { class: "badge", text: "this prefix" }));
  const row = el("tr", { class: "entry-row", dataset: { key: formatKey(entry.key) } },
    keyCell,
    el("td", { class: "count num", text: "" }),
    valueCell(entry),
    el("td", { class: "stamp", title: entry.versionstamp, text: entry.versionstamp }),
    el("td", { class: "act" }, openButton(entry.key)));
  markOpen(row, entry.key);
  return row;
}

async function loadPage(more) {
  const seq = ++state.listSeq;
  const { db, prefix, view } = state;
  $("list-more").disabled = true;
  setText($("list-status"), "Loading…");
  try {
    const request = { prefix, limit: view === "all" ? LIST_PAGE : FOLDER_PAGE };
    if (more && state.cursor) request.cursor = state.cursor;
    // Deno lists keys strictly under a prefix; the entry at the prefix itself is read apart.
    const [page, self] = await Promise.all([
      view === "all" ? shell.api.list(db, request) : shell.api.children(db, request),
      !more && prefix.length ? shell.api.get(db, prefix) : Promise.resolve(null),
    ]);
    if (seq !== state.listSeq) return;
    const body = $("entries-body");
    if (!more) {
      clear(body);
      state.shown = 0;
    }
    if (self) body.append(entryRow(self, { self: true }));
    const rows = view === "all" ? page.entries.map((e) => entryRow(e)) : page.children.map(childRow);
    body.append(...rows);
    state.shown += rows.length;
    state.cursor = page.cursor;
    show($("list-more"), Boolean(page.cursor));
    const n = state.shown;
    const what = view === "all" ? `entr${n === 1 ? "y" : "ies"}` : `key part${n === 1 ? "" : "s"}`;
    setText($("list-status"), n === 0 && !self
      ? `No entries under ${formatKey(prefix)}.`
      : `${n} ${what}${page.cursor ? " (more below)" : ""}`);
  } catch (e) {
    if (seq !== state.listSeq) return;
    setText($("list-status"), "");
    shell.fail($("list-message"), e, "Could not list the entries: ");
  } finally {
    if (seq === state.listSeq) $("list-more").disabled = false;
  }
}

function reloadList() {
  state.cursor = null;
  return loadPage(false);
}

// Reloads the first page shortly (once for a burst of changes); a listing grown by "Load
// more" is left alone, so the rows the user paged to stay.
let listTimer = 0;
function refreshListSoon() {
  if (state.shown > (state.view === "all" ? LIST_PAGE : FOLDER_PAGE)) return;
  clearTimeout(listTimer);
  listTimer = setTimeout(() => loadPage(false), 200);
}

// --- One entry --------------------------------------------------------------------------------

function showPane(which) {
  show($("detail"), which === "detail");
  show($("create"), which === "create");
  show($("detail-pane"), Boolean(which));
  $("page-entries").classList.toggle("with-pane", Boolean(which));
}

function closeDetail() {
  state.current = null;
  for (const r of $("entries-body").querySelectorAll("tr.selected")) r.classList.remove("selected");
  if (!$("create").hidden) return;
  showPane(null);
}

function typeName(value) {
  if (!value) return "–";
  if (value.type === "Array") return `Array(${value.value.length})`;
  if (value.type === "Map" || value.type === "Set") return `${value.type}(${value.value.length})`;
  if (value.type === "object") return "object";
  return value.type;
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
  const tree = clear($("detail-tree"));
  for (const r of $("entries-body").querySelectorAll("tr")) {
    r.classList.toggle("selected", r.dataset.key === formatKey(key));
  }
  if (!entry) {
    setText($("detail-versionstamp"), "–");
    setText($("detail-expires"), "–");
    setText($("detail-type"), "–");
    setText($("detail-preview"), "No entry has this key (it was deleted, or never written).");
    setText($("detail-json"), "");
    $("edit-value").value = "";
    $("edit-expires").value = "never";
    return;
  }
  setText($("detail-versionstamp"), entry.versionstamp);
  const expires = $("detail-expires");
  setText(expires, entry.expires_at ? `${relativeTime(entry.expires_at)} (${entry.expires_at})` : "never");
  setText($("detail-type"), typeName(entry.value));
  setText($("detail-preview"), describeValue(entry.value, 300));
  const safeName = formatKey(key).replace(/[^\w.-]+/g, "_").replace(/^_+|_+$/g, "").slice(0, 80) || "value";
  // A tree for what has parts or bytes; the line above says the rest.
  const t = entry.value.type;
  if (["Array", "object", "Map", "Set", "HostObject", "ArrayBuffer", "DataView", "v8"].includes(t) ||
      /Error$|Array$/.test(t)) {
    tree.append(valueTree(entry.value, `${safeName}.bin`));
  }
  setText($("detail-json"), JSON.stringify(entry.value, null, 2));
  const literal = formatLiteral(entry.value);
  $("edit-format").value = literal === null ? "typed" : "literal";
  $("edit-value").value = literal ?? JSON.stringify(entry.value, null, 2);
  $("edit-expires").value = entry.expires_at ?? "never";
}

async function openEntry(key, { keepMessage = false } = {}) {
  const db = state.db;
  try {
    const entry = await shell.api.get(db, key);
    if (db !== state.db) return;
    state.current = { key, entry };
    renderEntry();
    if (!keepMessage) message($("detail-message"), "");
    showPane("detail");
  } catch (e) {
    shell.fail($("list-message"), e, "Could not read the entry: ");
  }
}

$("detail-close").addEventListener("click", () => goOpen(null));
$("detail-reload").addEventListener("click", () => openEntry(state.current.key));
$("detail-watch").addEventListener("click", () => shell.startWatch(state.current.key, "key"));

$("detail-raw-button").addEventListener("click", async () => {
  const raw = $("detail-raw");
  try {
    const entry = await shell.api.get(state.db, state.current.key, true);
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
    shell.fail($("detail-message"), e, "Could not read the raw bytes: ");
  }
});

// Converts the text being edited when the format changes, if it reads; else leaves it.
function convertOnChange(select, textarea, out) {
  select.addEventListener("change", () => {
    const to = select.value;
    const from = to === "literal" ? "typed" : "literal";
    try {
      const value = readEditor(textarea.value, from);
      const text = to === "literal" ? formatLiteral(value) : JSON.stringify(value, null, 2);
      if (text === null) {
        message(out, "This value has parts the literal syntax cannot write (shared objects, " +
          "holes, buffers, boxed primitives); edit it as KvValueJSON.", "error");
        select.value = "typed";
        return;
      }
      textarea.value = text;
    } catch {
      // left as typed
    }
  });
}
convertOnChange($("edit-format"), $("edit-value"), $("detail-message"));
convertOnChange($("create-format"), $("create-value"), $("create-message"));

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
  let expireIn;
  try {
    value = readEditor($("edit-value").value, $("edit-format").value);
    expireIn = readExpiry($("edit-expires").value);
  } catch (e) {
    message(out, e.message, "error");
    return;
  }
  $("edit-save").disabled = true;
  message(out, "Saving…");
  try {
    const res = await shell.api.set(state.db, current.key, value,
      { versionstamp: current.entry.versionstamp, expireIn: expireIn ?? undefined });
    await openEntry(current.key, { keepMessage: true });
    message(out, `Saved. New versionstamp ${res.versionstamp}.`, "ok");
    refreshListSoon();
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) {
      message(out, CONFLICT_TEXT(current.entry.versionstamp), "conflict");
    } else {
      shell.fail(out, e, "Not saved: ");
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
    await shell.api.remove(state.db, current.key, current.entry.versionstamp);
    await goOpen(null);
    await reloadList();
    shell.flash($("list-message"), `Deleted ${formatKey(current.key)}.`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) {
      message(out, `Conflict: not deleted. Someone else changed this entry after you opened it ` +
        `(you read versionstamp ${current.entry.versionstamp}). Reload it and decide again.`,
      "conflict");
    } else {
      shell.fail(out, e, "Not deleted: ");
    }
  }
});

// --- New entry --------------------------------------------------------------------------------

$("new-entry").addEventListener("click", () => {
  $("create-key").value = state.prefix.length
    ? formatKey([...state.prefix, { type: "string", value: "" }]) : "";
  $("create-value").value = "";
  $("create-expires").value = "never";
  message($("create-message"), "");
  showPane("create");
  $("create-key").focus();
});
const closeCreate = () => {
  show($("create"), false);
  if (state.current) showPane("detail");
  else showPane(null);
};
$("create-cancel").addEventListener("click", closeCreate);
$("create-close").addEventListener("click", closeCreate);

$("create-form").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const out = $("create-message");
  let key;
  let value;
  let expireIn;
  try {
    key = parseKey($("create-key").value);
    if (key.length === 0) throw new Error("A key needs at least one part.");
    value = readEditor($("create-value").value, $("create-format").value);
    expireIn = readExpiry($("create-expires").value);
  } catch (e) {
    message(out, e.message, "error");
    return;
  }
  try {
    const absent = $("create-absent").checked;
    await shell.api.set(state.db, key, value,
      { versionstamp: absent ? null : undefined, expireIn: expireIn ?? undefined });
    show($("create"), false);
    await goOpen(key);
    message($("detail-message"), "Created.", "ok");
    refreshListSoon();
  } catch (e) {
    if (e instanceof ApiError && e.status === 409) {
      message(out, "Not created: an entry with this key already exists. Nothing was written.",
        "conflict");
    } else {
      shell.fail(out, e, "Not created: ");
    }
  }
});

// --- Page controls ----------------------------------------------------------------------------

$("prefix-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const text = $("prefix-input").value.trim();
  try {
    const prefix = text ? parseKey(text) : [];
    state.forceRelist = true;  // "Go" lists again even where it already is
    goPrefix(prefix);
  } catch (e) {
    message($("list-message"), e.message, "error");
  }
});
$("list-reload").addEventListener("click", () => reloadList());
$("list-more").addEventListener("click", () => loadPage(true));
$("watch-prefix").addEventListener("click", () => shell.startWatch(state.prefix, "prefix"));
$("view-folders").addEventListener("click", () => shell.navigate(routeFor({ view: "folders" })));
$("view-flat").addEventListener("click", () => shell.navigate(routeFor({ view: "all" })));
document.addEventListener("keydown", (ev) => {
  if (ev.key === "Escape" && !$("detail-pane").hidden && !$("page-entries").hidden) {
    if (!$("create").hidden) closeCreate();
    else goOpen(null);
  }
});

// --- The page ---------------------------------------------------------------------------------

export function init(s) {
  shell = s;
}

// Shows `route` (an entries route of route.js).
export async function enter(route) {
  for (const id of ["list-message", "detail-message", "create-message"]) message($(id), "");
  const relist = route.db !== state.db || route.view !== state.view ||
    route.prefix.length !== state.prefix.length || !sameKey(route.prefix, state.prefix) ||
    $("entries-body").children.length === 0 || state.forceRelist;
  state.forceRelist = false;
  if (route.db !== state.db) {
    state.current = null;
    showPane(null);
  }
  state.db = route.db;
  state.prefix = route.prefix;
  state.view = route.view;
  renderBreadcrumb();
  const listing = relist ? reloadList() : Promise.resolve();
  if (route.open) {
    if (!state.current || !sameKey(state.current.key, route.open) || relist) {
      await Promise.all([listing, openEntry(route.open)]);
      return;
    }
  } else {
    closeDetail();
  }
  await listing;
}

// Leaving the page: nothing runs in the background.
export function leave() {
  state.listSeq++;
}

// Signed out: forget everything shown.
export function reset() {
  state.db = null;
  state.prefix = [];
  state.current = null;
  state.cursor = null;
  state.listSeq++;
  clear($("entries-body"));
  showPane(null);
}

// A change seen by a watch: warn if it is the open entry; refresh the listing under it.
export function noteChange(item) {
  const current = state.current;
  if (current && sameKey(current.key, item.key) &&
      (item.versionstamp ?? null) !== (current.entry?.versionstamp ?? null)) {
    message($("detail-notice"), item.versionstamp
      ? `This entry changed elsewhere (now versionstamp ${item.versionstamp}); saving your edit ` +
        "would be refused. Reload it to see the new value."
      : "This entry was deleted elsewhere.", "conflict");
  }
  if (state.db && hasPrefix(item.key, state.prefix)) refreshListSoon();
}
