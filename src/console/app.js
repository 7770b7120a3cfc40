// The kvconnect web console's shell: sign in with an admin access token, pick a database, and
// move between the pages (Entries, Watch, Import/Export, Queue, Tokens, Server) by the URL
// hash (route.js), so reload, Back and shared links work. Messages are cleared on every
// navigation. Everything goes through the admin JSON API (api.js); text reaches the page only
// as text nodes.
//
// Pages: entries.js, watch.js and server.js use markup of index.html; queue.js, tokens.js and
// transfer.js are mounted into an empty element: `mount(root, ctx)` with
//   ctx = { api, db, route, navigate(hash), setMessage(text, kind), onLeave(fn),
//           formatRoute(route) }
// (`api` the signed-in AdminClient, `db` the database name or null on a server-wide page,
// `route` the parsed place (route.js), `onLeave` functions run when the user navigates away).

import { AdminClient, ApiError } from "./api.js";
import { $, clear, el, message, show } from "./dom.js";
import * as entries from "./entries.js";
import * as queuePage from "./queue.js";
import { formatRoute, parseRoute } from "./route.js";
import * as server from "./server.js";
import * as tokensPage from "./tokens.js";
import * as transferPage from "./transfer.js";
import * as watch from "./watch.js";

const TOKEN_KEY = "kvconnect.console.token";  // sessionStorage, only if the user asks
const DB_KEY = "kvconnect.console.database";  // sessionStorage; not a secret

const MOUNTED = { queue: queuePage, tokens: tokensPage, transfer: transferPage };

const state = {
  api: null,          // AdminClient while signed in
  databases: [],      // the last database list
  db: null,           // the selected database
  route: null,        // the place shown (route.js)
  entriesRoute: null, // the last place on the entries page, for its tab
  leave: [],          // functions to run when leaving the mounted page
  routeSeq: 0,
};

// The text for an error.
export function describeError(e) {
  if (e instanceof ApiError) {
    return e.status ? `${e.message} (HTTP ${e.status}${e.code ? `, ${e.code}` : ""})` : e.message;
  }
  return e?.message ?? String(e);
}

// What the pages get from the shell.
const shell = {
  get api() { return state.api; },
  get db() { return state.db; },
  get databases() { return state.databases; },
  navigate,
  formatRoute,
  describeError,
  setMessage: (text, kind = "") => message($("app-message"), text, kind),
  // Reports `e` on `node`; a rejected token signs out.
  fail(node, e, prefix = "") {
    if (e instanceof ApiError && e.status === 401) {
      signOut(`Signed out: the server no longer accepts this token. ${e.message}`);
      return;
    }
    message(node, `${prefix}${describeError(e)}`, "error");
  },
  // A success message that goes away after a while (unless replaced meanwhile).
  flash(node, text) {
    message(node, text, "ok");
    setTimeout(() => {
      if (node.textContent === text) message(node, "");
    }, 10_000);
  },
  reloadDatabases,
  // Watches a key or a prefix of the current database and shows the Watch page.
  startWatch(key, mode) {
    watch.start(key, mode);
    return navigate(formatRoute({ page: "watch", db: state.db }));
  },
};

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
  server.start();
  await handleRoute();
}

function signOut(why = "") {
  watch.stop("Not watching.");
  server.stop();
  leaveMounted();
  entries.reset();
  state.api = null;
  state.db = null;
  state.route = null;
  sessionStorage.removeItem(TOKEN_KEY);
  show($("app-view"), false);
  show($("session"), false);
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
  server.renderDatabaseFacts();
}

async function reloadDatabases() {
  try {
    setDatabases((await state.api.databases()).databases);
  } catch (e) {
    shell.fail($("app-message"), e, "Could not list the databases: ");
  }
}

// The database to show when the hash names none.
function defaultDatabase() {
  const names = state.databases.map((d) => d.name);
  const wanted = sessionStorage.getItem(DB_KEY);
  return names.includes(wanted) ? wanted : names.includes("default") ? "default" : names[0] ?? null;
}

$("db-select").addEventListener("change", (ev) => {
  const page = state.route?.page && state.route.page !== "tokens" ? state.route.page : "entries";
  navigate(formatRoute({ page, db: ev.target.value, prefix: [] }));
});
$("db-refresh").addEventListener("click", async () => {
  await reloadDatabases();
  server.refresh();
});

// --- Routing ----------------------------------------------------------------------------------

// Goes to `hash` (a new history entry) and shows it.
export function navigate(hash) {
  // Compared as the browser writes a hash (it percent-encodes quotes and spaces).
  if (location.hash !== new URL(hash, location.href).hash) history.pushState(null, "", hash);
  return handleRoute();
}

function leaveMounted() {
  const fns = state.leave;
  state.leave = [];
  for (const fn of fns) {
    try {
      fn();
    } catch (e) {
      console.error(e);
    }
  }
  clear($("page-mounted"));
}

function renderTabs(route) {
  for (const a of $("tabs").querySelectorAll("a")) {
    const page = a.dataset.page;
    let target;
    if (page === "tokens") target = { page: "tokens" };
    else if (page === "entries") target = state.entriesRoute?.db === state.db ? state.entriesRoute : { page, db: state.db, prefix: [] };
    else target = { page, db: state.db };
    a.setAttribute("href", formatRoute(target));
    if (page === route.page) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
}

async function handleRoute() {
  if (!state.api) return;
  const seq = ++state.routeSeq;
  let route = null;
  try {
    route = parseRoute(location.hash);
  } catch {
    route = null;
  }
  const known = (name) => state.databases.some((d) => d.name === name);
  // A database made since the list was read (or a link to one): read the list again once.
  if (route?.db && !known(route.db)) await reloadDatabases();
  if (seq !== state.routeSeq) return;
  const db = route?.db ?? (route?.page === "tokens" ? state.db ?? defaultDatabase() : defaultDatabase());
  if (!route || (route.db && !known(route.db))) {
    const bad = route?.db;
    const fallback = defaultDatabase();
    if (!fallback) {
      message($("app-message"), "This token sees no database.", "error");
      return;
    }
    history.replaceState(null, "", formatRoute({ page: "entries", db: fallback, prefix: [] }));
    await handleRoute();
    if (bad) {
      message($("app-message"), `There is no database "${bad}" (or this token does not open it); ` +
        `showing ${fallback}.`, "error");
    }
    return;
  }
  // Messages belong to the place they were said in.
  message($("app-message"), "");
  const previous = state.route;
  state.route = route;
  if (db !== state.db) {
    watch.stop("Not watching.");
    state.db = db;
    sessionStorage.setItem(DB_KEY, db);
    $("db-select").value = db;
    server.renderDatabaseFacts();
  }
  if (route.page === "entries") state.entriesRoute = route;
  renderTabs(route);
  leaveMounted();
  for (const page of ["entries", "watch", "server"]) show($(`page-${page}`), route.page === page);
  show($("page-mounted"), route.page in MOUNTED);
  if (route.page !== "entries") entries.leave();
  if (route.page === "entries") {
    await entries.enter(route, previous);
  } else if (route.page === "watch") {
    watch.enter(route);
  } else if (route.page === "server") {
    server.refresh();
  } else if (seq === state.routeSeq) {
    const root = el("div", { class: `mounted mounted-${route.page}` });
    $("page-mounted").append(root);
    const ctx = {
      api: state.api,
      db: route.page === "tokens" ? null : db,
      route,
      navigate,
      formatRoute,
      setMessage: shell.setMessage,
      onLeave: (fn) => state.leave.push(fn),
    };
    try {
      await MOUNTED[route.page].mount(root, ctx);
    } catch (e) {
      shell.fail($("app-message"), e, `The ${route.page} page failed: `);
    }
  }
}

window.addEventListener("hashchange", () => handleRoute());

entries.init(shell);
watch.init(shell);
server.init(shell);

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
