// The Tokens page: every access token the server knows (scope, databases, created, expiry,
// status), a form that creates one and shows its secret once, and revoke (asked twice).
// Managing tokens is server-wide: only the server's bootstrap token may (others get 403).
//
// mount(root, ctx): ctx = {api: AdminClient, db, navigate(hash), setMessage(text, kind),
// onLeave(fn)}.

import { ApiError } from "./api.js";
import { clear, el } from "./dom.js";
import {
  confirmButton, count, describeError, ensureStyles, messageLine, timeNode,
} from "./page_kit.js";

const SCOPES = [
  ["read", "read: get, list and watch"],
  ["write", "write: read and write (what a Deno app needs)"],
  ["admin", "admin: write, plus this console and the admin API"],
  ["queue", "queue: only the queue API (enqueue, pull, ack)"],
];

// The server reads "30d", "12h", "90m", "45s", "2w" or "never".
const EXPIRIES = [
  ["never", "never"], ["1h", "in 1 hour"], ["1d", "in 1 day"], ["7d", "in 7 days"],
  ["30d", "in 30 days"], ["90d", "in 90 days"], ["365d", "in 1 year"],
];

const STATUS_ORDER = { active: 0, expired: 1, revoked: 2 };

export function mount(root, ctx) {
  ensureStyles();
  const api = ctx.api;
  let alive = true;
  ctx.onLeave?.(() => {
    alive = false;
    clear(secretBox);  // the secret leaves the page with it
  });

  const status = messageLine();
  const listStatus = el("span", { class: "muted", role: "status" });
  const body = el("tbody", { id: "tokens-body" });
  const showAll = el("input", { type: "checkbox", id: "tokens-show-all", checked: true });

  // --- Create ---
  const name = el("input", { id: "token-name", maxlength: "200", spellcheck: "false",
    placeholder: "e.g. billing-worker" });
  const scope = el("select", { id: "token-scope" },
    SCOPES.map(([v, label]) => el("option", { value: v, text: label })));
  scope.value = "write";
  const expires = el("select", { id: "token-expires" },
    EXPIRIES.map(([v, label]) => el("option", { value: v, text: label })));
  expires.value = "30d";
  const rate = el("input", { id: "token-rate", type: "number", min: "0", step: "1",
    placeholder: "server default" });
  const allDbs = el("input", { type: "radio", name: "token-dbs", id: "token-all-dbs",
    value: "all" });
  const someDbs = el("input", { type: "radio", name: "token-dbs", id: "token-some-dbs",
    value: "some", checked: true });
  const dbList = el("div", { id: "token-db-list", class: "checks" });
  const createButton = el("button", { type: "submit", id: "token-create", text: "Create token" });
  const createMessage = messageLine();
  const secretBox = el("div", { id: "token-secret-box" });

  const form = el("form", { id: "token-form", class: "form-grid", autocomplete: "off" },
    el("label", { for: "token-name", text: "Name" }), name,
    el("label", { for: "token-scope", text: "Scope" }), scope,
    el("span", { class: "label", text: "Databases" }),
    el("div", {},
      el("label", { class: "check" }, someDbs, "These databases:"), dbList,
      el("label", { class: "check" }, allDbs,
        "All databases, present and future (a database admin on each with scope admin; " +
        "never server-wide)")),
    el("label", { for: "token-expires", text: "Expires" }), expires,
    el("label", { for: "token-rate", text: "Rate limit (requests/s, 0 unlimited)" }), rate,
    el("span", {}), el("div", { class: "row" }, createButton));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    create();
  });
  dbList.addEventListener("change", () => {
    someDbs.checked = true;
  });

  root.append(
    el("section", { class: "card page-tokens", "aria-labelledby": "tokens-title" },
      el("h2", { id: "tokens-title", text: "Tokens" }),
      el("p", { class: "muted", text: "Access tokens open databases for Deno " +
        "(DENO_KV_ACCESS_TOKEN), @deno/kv and the admin API. The server keeps only a hash of " +
        "each: a token's secret is shown once, when it is created. Managing tokens needs the " +
        "server's bootstrap token." }),
      status),
    el("section", { class: "card", "aria-labelledby": "token-new-title" },
      el("h3", { id: "token-new-title", text: "New token" }), form, createMessage, secretBox),
    el("section", { class: "card", "aria-labelledby": "token-list-title" },
      el("h3", { id: "token-list-title", text: "All tokens" }),
      el("div", { class: "row toolbar" },
        el("button", { type: "button", id: "tokens-reload", text: "Reload",
          on: { click: () => load() } }),
        el("label", { class: "check" }, showAll, "Show revoked and expired tokens"),
        listStatus),
      el("table", { class: "entries tokens" },
        el("thead", {}, el("tr", {},
          ["Name / id", "Scope", "Databases", "Created", "Expires", "Status", ""]
            .map((h) => el("th", { text: h })))),
        body)));
  showAll.addEventListener("change", () => render());

  let tokens = [];

  async function loadDatabases() {
    try {
      const { databases } = await api.databases();
      if (!alive) return;
      clear(dbList);
      for (const d of databases) {
        dbList.append(el("label", { class: "check" },
          el("input", { type: "checkbox", value: d.name, checked: d.name === ctx.db }), d.name));
      }
      if (!databases.length) dbList.append(el("span", { class: "muted", text: "(none)" }));
    } catch (e) {
      createMessage.show(`Could not list the databases: ${describeError(e)}`, "error");
    }
  }

  async function load() {
    listStatus.textContent = "Loading…";
    try {
      tokens = (await api.tokens()).tokens;
      if (!alive) return;
      render();
    } catch (e) {
      if (!alive) return;
      listStatus.textContent = "";
      clear(body);
      if (e instanceof ApiError && e.status === 403) {
        status.show("Only the server's bootstrap token manages tokens (it is printed by " +
          "`kvconnect serve` and kept in <data-dir>/access-token); you are signed in with " +
          `another one. ${e.message}`, "error");
        form.hidden = true;
      } else {
        status.show(`Could not list the tokens: ${describeError(e)}`, "error");
      }
    }
  }

  function render() {
    clear(body);
    const shown = tokens
      .filter((t) => showAll.checked || t.status === "active")
      .sort((a, b) => (STATUS_ORDER[a.status] ?? 3) - (STATUS_ORDER[b.status] ?? 3) ||
        String(b.created_at).localeCompare(String(a.created_at)));
    for (const t of shown) body.append(row(t));
    const active = tokens.filter((t) => t.status === "active").length;
    listStatus.textContent = `${count(tokens.length, "token")}, ${active} active` +
      (shown.length < tokens.length ? ` (${shown.length} shown)` : "");
  }

  function row(t) {
    const databases = t.all_databases ? "all databases"
      : t.databases.length ? t.databases.join(", ") : "(deleted)";
    const action = el("td", { class: "actions" });
    if (t.status === "active") {
      action.append(confirmButton("Revoke", "Click again to revoke", () => revoke(t),
        { attrs: { class: "danger revoke", "aria-label": `Revoke ${t.name || t.id}` } }));
    }
    return el("tr", { class: `token-row ${t.status}`, dataset: { id: t.id, status: t.status } },
      el("td", {}, el("div", { text: t.name || "(no name)" }),
        el("code", { class: "muted", text: t.id })),
      el("td", { class: "scope", text: t.scope }),
      el("td", { class: "dbs", text: databases }),
      timeNode("td", t.created_at),
      timeNode("td", t.expires_at, {}, "never"),
      el("td", {}, el("span", { class: `status ${t.status}`, text: t.status }),
        t.revoked_at ? timeNode("div", t.revoked_at, { class: "muted small" }) : null),
      action);
  }

  async function revoke(t) {
    try {
      await api.revokeToken(t.id);
      status.show(`Revoked ${t.name ? `"${t.name}" ` : ""}(${t.id}). Clients that use it are ` +
        "refused from their next request on.", "ok");
    } catch (e) {
      status.show(`Not revoked: ${describeError(e)}`, "error");
    }
    await load();
  }

  async function create() {
    const request = { scope: scope.value, expires: expires.value };
    if (name.value.trim()) request.name = name.value.trim();
    if (rate.value !== "") request.rate_limit = Number(rate.value);
    if (allDbs.checked) {
      request.all_databases = true;
    } else {
      const picked = [...dbList.querySelectorAll("input:checked")].map((i) => i.value);
      if (!picked.length) {
        createMessage.show("Pick at least one database, or all databases.", "error");
        return;
      }
      request.databases = picked;
    }
    createButton.disabled = true;
    createMessage.show("Creating…");
    try {
      const { token, info } = await api.createToken(request);
      if (!alive) return;
      createMessage.show("");
      showSecret(token, info);
      name.value = "";
      await load();
    } catch (e) {
      createMessage.show(`Not created: ${describeError(e)}`, "error");
    } finally {
      createButton.disabled = false;
    }
  }

  // The secret, once: a copy button, how to use it, and Done (which removes it from the page).
  function showSecret(token, info) {
    const secret = el("code", { id: "token-secret", class: "secret", text: token });
    const copyMessage = el("span", { class: "muted", role: "status" });
    const copy = el("button", { type: "button", id: "token-copy", text: "Copy" });
    copy.addEventListener("click", async () => {
      try {
        await navigator.clipboard.writeText(token);
        copyMessage.textContent = "Copied.";
      } catch {
        // No clipboard permission: select the text so Ctrl+C copies it.
        const range = document.createRange();
        range.selectNodeContents(secret);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
        copyMessage.textContent = "Selected: press Ctrl+C (or Cmd+C) to copy.";
      }
    });
    const origin = location.origin;
    const names = info.all_databases ? ["NAME"] : info.databases;
    const usage = names.map((n) => (n === "default"
      ? `Deno.openKv("${origin}")` : `Deno.openKv("${origin}/databases/${n}/connect")`));
    clear(secretBox).append(el("div", { class: "secret-box" },
      el("p", { class: "message ok", text: `Created ${info.scope} token ` +
        `${info.name ? `"${info.name}" ` : ""}(${info.id}). Copy it now: it is shown only ` +
        "once, and the server cannot show it again." }),
      el("div", { class: "row" }, secret, copy,
        el("button", { type: "button", id: "token-done", text: "Done, hide it",
          on: { click: () => clear(secretBox) } }),
        copyMessage),
      el("p", { class: "muted", text: "Use it as DENO_KV_ACCESS_TOKEN with " +
        `${usage.join(" or ")}.` })));
  }

  loadDatabases();
  load();
}
