// The Queue page of the current database: how many messages are ready, delayed (waiting for
// their time or a retry), leased (being handled) and dead, and the dead letters (the messages
// whose every delivery failed) with their last error and attempts, to requeue or purge one by
// one, selected, or all. Admin API: GET .../queue, POST .../queue/dead/{list,requeue,purge}.
//
// mount(root, ctx): ctx = {api: AdminClient, db, navigate(hash), setMessage(text, kind),
// onLeave(fn)}.

import { clear, el } from "./dom.js";
import { describeValue, formatKey } from "./kv.js";
import {
  confirmButton, count, describeError, messageLine, startDatabasePage, timeNode,
} from "./page_kit.js";

const PAGE = 100;             // dead letters per list call
const REFRESH_MS = 5000;      // counts, while the page is open and auto refresh is on

export function mount(root, ctx) {
  if (!startDatabasePage(root, ctx, "Queue")) return;
  const api = ctx.api;
  const name = ctx.db;
  let alive = true;
  let timer = 0;
  ctx.onLeave?.(() => {
    alive = false;
    clearInterval(timer);
  });

  const status = messageLine();
  const counts = el("dl", { id: "queue-counts", class: "tiles" });
  const updated = el("span", { class: "muted", role: "status" });
  const auto = el("input", { type: "checkbox", id: "queue-auto", checked: true });
  const body = el("tbody", { id: "dead-body" });
  const listStatus = el("span", { id: "dead-status", class: "muted", role: "status" });
  const more = el("button", { type: "button", id: "dead-more", text: "Load more", hidden: true });
  const selectAll = el("input", { type: "checkbox", id: "dead-select-all",
    "aria-label": "Select every dead letter shown" });
  const selected = () => [...body.querySelectorAll("input.pick:checked")].map((i) => i.value);

  const bulk = el("div", { class: "row toolbar" },
    el("button", { type: "button", id: "dead-requeue-selected", text: "Requeue selected",
      on: { click: () => act("requeue", { ids: selected() }) } }),
    confirmButton("Purge selected", "Click again to purge the selected",
      () => act("purge", { ids: selected() }), { attrs: { id: "dead-purge-selected" } }),
    confirmButton("Requeue all", "Click again to requeue every dead letter",
      () => act("requeue", { all: true }), { className: "", attrs: { id: "dead-requeue-all" } }),
    confirmButton("Purge all", "Click again to delete every dead letter",
      () => act("purge", { all: true }), { attrs: { id: "dead-purge-all" } }),
    listStatus);

  root.append(
    el("section", { class: "card page-queue", "aria-labelledby": "queue-title" },
      el("h2", { id: "queue-title", text: `Queue of ${name}` }),
      el("p", { class: "muted", text: "Messages enqueued by Deno, @deno/kv or the queue API " +
        "wait here until a consumer (listenQueue, the queue API or push delivery) takes them. " +
        "A message whose every delivery failed becomes a dead letter: its value was written to " +
        "its keysIfUndelivered keys, and it is kept here until it is requeued or purged." }),
      counts,
      el("div", { class: "row" },
        el("button", { type: "button", id: "queue-refresh", text: "Refresh",
          on: { click: () => refresh() } }),
        el("label", { class: "check" }, auto, `Refresh every ${REFRESH_MS / 1000} s`),
        updated),
      status),
    el("section", { class: "card", "aria-labelledby": "dead-title" },
      el("h3", { id: "dead-title", text: "Dead letters" }),
      bulk,
      el("table", { class: "entries dead" },
        el("thead", {}, el("tr", {},
          el("th", { class: "pick" }, selectAll),
          ["Value", "Attempts", "Last error", "Dead since", "Written to", ""]
            .map((h) => el("th", { text: h })))),
        body),
      more));

  selectAll.addEventListener("change", () => {
    for (const box of body.querySelectorAll("input.pick")) box.checked = selectAll.checked;
  });
  more.addEventListener("click", () => loadDead(true));
  auto.addEventListener("change", schedule);

  let cursor = null;
  let seq = 0;

  function schedule() {
    clearInterval(timer);
    if (auto.checked) timer = setInterval(() => loadCounts(), REFRESH_MS);
  }

  async function loadCounts() {
    try {
      const c = await api.queueCounts(name);
      if (!alive) return;
      clear(counts);
      const tiles = [
        ["ready", "Ready", "due now, waiting for a consumer"],
        ["delayed", "Delayed", "waiting for their delay or their next retry"],
        ["leased", "Leased", "being handled by a consumer"],
        ["dead", "Dead", "every delivery failed"],
        ["undelivered", "Undelivered", "ready + delayed + leased, as the limit counts them"],
      ];
      for (const [key, label, hint] of tiles) {
        if (c[key] === undefined) continue;
        counts.append(el("div", { class: `tile ${key}${key === "dead" && c.dead ? " alert" : ""}`,
          title: hint, dataset: { count: key } },
        el("dt", { text: label }), el("dd", { text: Number(c[key]).toLocaleString("en-US") })));
      }
      updated.textContent = `Updated ${new Date().toLocaleTimeString()}.`;
      return c;
    } catch (e) {
      if (alive) status.show(`Could not read the queue: ${describeError(e)}`, "error");
      return null;
    }
  }

  async function loadDead(append) {
    const mine = ++seq;
    listStatus.textContent = "Loading…";
    try {
      const request = { limit: PAGE };
      if (append && cursor) request.cursor = cursor;
      const page = await api.deadLetters(name, request);
      if (!alive || mine !== seq) return;
      if (!append) {
        clear(body);
        selectAll.checked = false;
      }
      for (const d of page.dead_letters) body.append(row(d));
      cursor = page.cursor;
      more.hidden = !cursor;
      const shown = body.children.length;
      listStatus.textContent = shown
        ? `${count(shown, "dead letter")} shown${cursor ? " (more below)" : ""}`
        : "No dead letters.";
    } catch (e) {
      if (!alive || mine !== seq) return;
      listStatus.textContent = "";
      status.show(`Could not list the dead letters: ${describeError(e)}`, "error");
    }
  }

  function row(d) {
    const keys = d.keys_if_undelivered ?? [];
    return el("tr", { class: "dead-row", dataset: { id: d.id } },
      el("td", { class: "pick" }, el("input", { type: "checkbox", class: "pick", value: d.id,
        "aria-label": `Select dead letter ${d.id}` })),
      el("td", { class: "preview", title: `id ${d.id}`, text: describeValue(d.value, 200) }),
      el("td", { class: "attempts", text: String(d.attempts) }),
      el("td", { class: "error-text", text: d.last_error || "(none recorded)" }),
      timeNode("td", d.dead_at),
      el("td", { class: "key", text: keys.length ? keys.map(formatKey).join("\n") : "–" }),
      el("td", { class: "actions" },
        el("button", { type: "button", class: "requeue", text: "Requeue",
          title: "Deliver it again now, with Deno's default backoff",
          on: { click: () => act("requeue", { ids: [d.id] }) } }),
        confirmButton("Purge", "Click again to delete", () => act("purge", { ids: [d.id] }),
          { attrs: { class: "danger purge" } })));
  }

  // Requeues or purges {ids} or {all: true}, then reloads counts and list.
  async function act(what, selection) {
    if (selection.ids && !selection.ids.length) {
      status.show("Select dead letters first (the boxes on the left).", "error");
      return;
    }
    try {
      const { count: n } = what === "requeue"
        ? await api.requeueDead(name, selection) : await api.purgeDead(name, selection);
      if (!alive) return;
      status.show(what === "requeue"
        ? `Requeued ${count(n, "dead letter")}: due now, delivered again with Deno's default ` +
          "backoff schedule."
        : `Purged ${count(n, "dead letter")}: deleted for good.`, "ok");
    } catch (e) {
      status.show(`Not ${what === "requeue" ? "requeued" : "purged"}: ${describeError(e)}`,
        "error");
    }
    await refresh();
  }

  async function refresh() {
    cursor = null;
    await Promise.all([loadCounts(), loadDead(false)]);
  }

  refresh();
  schedule();
}
