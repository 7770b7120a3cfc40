// Small helpers the Tokens, Queue and Import/Export pages share: error texts, human times,
// counts with plurals, a button that asks once more, the pages' stylesheet and start. Pure DOM, text
// nodes only (dom.js).

import { ApiError } from "./api.js";
import { el } from "./dom.js";

// The text for an error: the server's message with its HTTP status and code.
export function describeError(e) {
  if (e instanceof ApiError) {
    return e.status ? `${e.message} (HTTP ${e.status}${e.code ? `, ${e.code}` : ""})` : e.message;
  }
  return e?.message ?? String(e);
}

// "1 entry", "2,000 entries".
export function count(n, one, many = `${one}s`) {
  return `${Number(n).toLocaleString("en-US")} ${n === 1 ? one : many}`;
}

// "in 30 days", "3 hours ago", "just now": the distance to `ms` in the unit that reads best,
// rounded (a token made to expire in 30 days says "in 30 days", not "in 4 weeks").
export function relativeTime(ms, now = Date.now()) {
  const delta = ms - now;
  const s = Math.abs(delta) / 1000;
  if (s < 5) return "just now";
  const [n, unit] =
    s < 90 ? [s, "second"]
      : s < 55 * 60 ? [s / 60, "minute"]
        : s < 36 * 3600 ? [s / 3600, "hour"]
          : s < 60 * 86400 ? [s / 86400, "day"]
            : s < 700 * 86400 ? [s / (30 * 86400), "month"]
              : [s / (365 * 86400), "year"];
  const r = Math.round(n);
  const text = `${r} ${unit}${r === 1 ? "" : "s"}`;
  return delta > 0 ? `in ${text}` : `${text} ago`;
}

// A time (RFC 3339 text or epoch milliseconds) for people: {text: "27 Nov 2026, 14:56 (3
// hours ago)", title: the exact UTC time}. null and undefined give {text: fallback}.
export function when(value, fallback = "–") {
  if (value === null || value === undefined || value === "") return { text: fallback, title: "" };
  const ms = typeof value === "number" ? value : Date.parse(value);
  if (!Number.isFinite(ms)) return { text: String(value), title: "" };
  const d = new Date(ms);
  const local = d.toLocaleString(undefined, {
    year: "numeric", month: "short", day: "numeric", hour: "2-digit", minute: "2-digit",
  });
  return { text: `${local} (${relativeTime(ms)})`, title: d.toISOString() };
}

// A table cell or span showing when(value), the exact time as its tooltip.
export function timeNode(tag, value, props = {}, fallback = "–") {
  const w = when(value, fallback);
  return el(tag, { ...props, text: w.text, title: w.title || undefined });
}

// A button that acts only when clicked twice: the first click shows `confirmText` for `ms`
// (then it goes back), the second runs onConfirm(). Returns the button.
export function confirmButton(label, confirmText, onConfirm, { ms = 5000, className = "danger",
  attrs = {} } = {}) {
  let timer = 0;
  const button = el("button", { type: "button", class: className, text: label, ...attrs });
  const reset = () => {
    clearTimeout(timer);
    delete button.dataset.armed;
    button.textContent = label;
  };
  button.addEventListener("click", () => {
    if (!button.dataset.armed) {
      button.dataset.armed = "1";
      button.textContent = confirmText;
      timer = setTimeout(reset, ms);
      return;
    }
    reset();
    onConfirm();
  });
  return button;
}

// Links pages.css once (the shell may link it in index.html already).
export function ensureStyles() {
  if (document.querySelector('link[href="/console/pages.css"]')) return;
  document.head.append(el("link", { rel: "stylesheet", href: "/console/pages.css" }));
}

// The start of a page of the current database: links the stylesheet, and without a database
// shows a card that asks for one and returns false.
export function startDatabasePage(root, ctx, title) {
  ensureStyles();
  if (ctx.db) return true;
  root.append(el("section", { class: "card" }, el("h2", { text: title }),
    el("p", { class: "message", text: "Choose a database first." })));
  return false;
}

// A message line inside a page: show(text, kind) with kind "", "ok", "error" or "conflict".
export function messageLine() {
  const node = el("p", { class: "message", role: "status", hidden: true });
  node.show = (text, kind = "") => {
    node.textContent = text ?? "";
    node.className = `message ${kind}`.trim();
    node.hidden = !text;
  };
  return node;
}
