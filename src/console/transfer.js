// The Import/Export page of the current database.
//
// Export: POST .../export (one snapshot, the server's own NDJSON dump) of every key or the keys
// under a prefix, downloaded as a file.
//
// Import: an NDJSON file sent to POST .../import in chunks (at most CHUNK_LINES lines and about
// CHUNK_BYTES bytes a request, cut only at line ends, sent as the file's own bytes), so the page
// can show lines and bytes done and stop between chunks. Each chunk is written by the server in
// whole atomic batches. Cancel aborts the request in flight (AbortController) and sends nothing
// more: every chunk the server had answered stays written; the chunk in flight was written
// whole, in part (whole batches) or not at all, depending on how far the server got; the page
// says which lines that concerns.
//
// mount(root, ctx): ctx = {api: AdminClient, db, navigate(hash), setMessage(text, kind),
// onLeave(fn)}.

import { ApiError } from "./api.js";
import { el } from "./dom.js";
import { formatBytes, formatKey, parseKey } from "./kv.js";
import { count, describeError, messageLine, startDatabasePage } from "./page_kit.js";

const CHUNK_LINES = 500;            // lines a request; also the server's batch (entries/commit)
const CHUNK_BYTES = 1 << 20;        // bytes a request, about (a longer line goes alone)
const MAX_LINE_BYTES = 3 << 20;     // below the server's default 4 MiB request limit

const NEWLINE = 0x0a;

// Lines of a file: its newlines, plus a last line without one.
async function countLines(file, signal) {
  let lines = 0;
  let last = NEWLINE;
  const reader = file.stream().getReader();
  for (;;) {
    if (signal.aborted) throw new DOMException("cancelled", "AbortError");
    const { value, done } = await reader.read();
    if (done) break;
    for (let i = 0; i < value.length; i++) if (value[i] === NEWLINE) lines++;
    if (value.length) last = value[value.length - 1];
  }
  return lines + (last === NEWLINE ? 0 : 1);
}

// The next chunk of `file` from byte `offset`: {bytes, lines}, cut after the CHUNK_LINES-th
// newline, else after the last newline within CHUNK_BYTES (a longer line alone), else at the end
// of the file. Throws for a line longer than MAX_LINE_BYTES.
async function nextChunk(file, offset, firstLine) {
  let window = CHUNK_BYTES;
  for (;;) {
    const end = Math.min(file.size, offset + window);
    const bytes = new Uint8Array(await file.slice(offset, end).arrayBuffer());
    let lines = 0;
    let cut = -1;
    for (let i = 0; i < bytes.length; i++) {
      if (bytes[i] !== NEWLINE) continue;
      lines++;
      cut = i + 1;
      if (lines === CHUNK_LINES) break;
    }
    if (lines === CHUNK_LINES) return { bytes: bytes.subarray(0, cut), lines };
    if (end === file.size) {
      // The rest of the file; a last line without a newline counts.
      const tail = bytes.length > 0 && bytes[bytes.length - 1] !== NEWLINE ? 1 : 0;
      return { bytes, lines: lines + tail };
    }
    if (cut > 0) return { bytes: bytes.subarray(0, cut), lines };
    if (window >= MAX_LINE_BYTES) {
      throw new Error(`line ${firstLine} is longer than ${formatBytes(MAX_LINE_BYTES)}; ` +
        "import such a file with `kvconnect import`.");
    }
    window = Math.min(window * 2, MAX_LINE_BYTES);
  }
}

export function mount(root, ctx) {
  if (!startDatabasePage(root, ctx, "Import and export")) return;
  const api = ctx.api;
  const name = ctx.db;
  let exporting = null;   // AbortController while an export runs
  let importing = null;   // AbortController while an import runs
  ctx.onLeave?.(() => {
    exporting?.abort();
    importing?.abort();
  });

  // --- Export ---
  const exportPrefix = el("input", { id: "export-prefix", spellcheck: "false",
    placeholder: 'Prefix, e.g. ["users"] (empty: every key)', "aria-label": "Prefix to export" });
  const exportButton = el("button", { type: "button", id: "export-start", text: "Export NDJSON" });
  const exportCancel = el("button", { type: "button", id: "export-cancel", text: "Cancel",
    disabled: true });
  const exportMessage = messageLine();
  exportMessage.id = "export-message";
  exportButton.addEventListener("click", () => runExport());
  exportCancel.addEventListener("click", () => exporting?.abort());

  // --- Import ---
  const file = el("input", { type: "file", id: "import-file-input",
    accept: ".ndjson,.jsonl,.json,application/x-ndjson", "aria-label": "NDJSON file to import" });
  const mode = el("select", { id: "import-mode", "aria-label": "Import mode" },
    el("option", { value: "merge", text: "Merge: write these entries, keep the others" }),
    el("option", { value: "replace", text: "Replace: first delete every key (under the prefix)" }));
  const importPrefix = el("input", { id: "import-prefix", spellcheck: "false",
    placeholder: "Only keys under this prefix (optional)", "aria-label": "Import prefix" });
  const importButton = el("button", { type: "button", id: "import-start", text: "Import" });
  const importCancel = el("button", { type: "button", id: "import-cancel", class: "danger",
    text: "Cancel", disabled: true });
  const bar = el("progress", { id: "import-progress", max: "1", value: "0", hidden: true });
  const progressText = el("span", { id: "import-progress-text", class: "muted", role: "status" });
  const importMessage = messageLine();
  importMessage.id = "import-message";
  importButton.addEventListener("click", () => runImport());
  importCancel.addEventListener("click", () => importing?.abort());

  root.append(
    el("section", { class: "card page-transfer", "aria-labelledby": "export-title" },
      el("h2", { id: "export-title", text: `Export ${name}` }),
      el("p", { class: "muted", text: "The server writes every entry (or every entry under the " +
        "prefix) as NDJSON, one KvEntryJSON a line, all read at one snapshot; " +
        "`kvconnect import` and this page read it back." }),
      el("div", { class: "row" }, exportPrefix, exportButton, exportCancel),
      exportMessage),
    el("section", { class: "card", "aria-labelledby": "import-title" },
      el("h2", { id: "import-title", text: `Import into ${name}` }),
      el("p", { class: "muted", text: `The file goes to the server in chunks of up to ` +
        `${CHUNK_LINES} lines, each written in whole atomic batches with new versionstamps. ` +
        "Cancel stops sending: the chunks already written stay written." }),
      el("div", { class: "row" }, file),
      el("div", { class: "row" }, mode, importPrefix),
      el("div", { class: "row" }, importButton, importCancel, bar, progressText),
      importMessage));

  // The key prefix typed in `input` ([] when empty), or null after saying in `message` why the
  // text is no key.
  function prefixOrSay(input, message) {
    const text = input.value.trim();
    try {
      return text ? parseKey(text) : [];
    } catch (e) {
      message.show(e.message, "error");
      return null;
    }
  }

  // Disables `button`, enables `cancel`; the AbortController of the run that starts.
  function startRun(button, cancel) {
    button.disabled = true;
    cancel.disabled = false;
    return new AbortController();
  }

  async function runExport() {
    const prefix = prefixOrSay(exportPrefix, exportMessage);
    if (!prefix) return;
    const controller = startRun(exportButton, exportCancel);
    exporting = controller;
    exportMessage.show("Exporting…");
    try {
      const dump = await api.exportDump(name, prefix.length ? { prefix } : {}, {
        signal: controller.signal,
        onBytes: (n) => exportMessage.show(`Exporting… ${formatBytes(n)} received`),
      });
      const text = await dump.blob.text();
      const entries = text ? text.split("\n").filter((l) => l.trim()).length : 0;
      const stamp = new Date().toISOString().replace(/[-:]/g, "").replace(/\..*$/, "");
      const fileName = `kvconnect-${name}-${stamp}.ndjson`;
      const url = URL.createObjectURL(dump.blob);
      el("a", { href: url, download: fileName }).click();
      setTimeout(() => URL.revokeObjectURL(url), 60_000);
      exportMessage.show(`Exported ${count(entries, "entry", "entries")} under ` +
        `${formatKey(prefix)} (${formatBytes(dump.bytes)}) as ${fileName}` +
        `${dump.versionstamp ? `, at versionstamp ${dump.versionstamp}` : ""}.`, "ok");
    } catch (e) {
      exportMessage.show(e.name === "AbortError" ? "Export cancelled; nothing was saved."
        : `Export failed: ${describeError(e)}`, e.name === "AbortError" ? "" : "error");
    } finally {
      if (exporting === controller) exporting = null;
      exportButton.disabled = false;
      exportCancel.disabled = true;
    }
  }

  async function runImport() {
    const picked = file.files[0];
    if (!picked) {
      importMessage.show("Choose an NDJSON file first.", "error");
      return;
    }
    const prefix = prefixOrSay(importPrefix, importMessage);
    if (!prefix) return;
    const controller = startRun(importButton, importCancel);
    importing = controller;
    importMessage.show("");
    const done = { lines: 0, bytes: 0, entries: 0, batches: 0, deleted: 0 };
    let totalLines = 0;
    let inFlight = null;  // {first, last} lines of the request under way
    const show = () => {
      bar.hidden = false;
      bar.max = Math.max(1, picked.size);
      bar.value = done.bytes;
      const pct = picked.size ? Math.floor((100 * done.bytes) / picked.size) : 100;
      progressText.textContent = `${done.lines.toLocaleString("en-US")} of ` +
        `${count(totalLines, "line")} (${pct}%) · ${formatBytes(done.bytes)} of ` +
        `${formatBytes(picked.size)} · ${count(done.entries, "entry", "entries")} written`;
    };
    try {
      progressText.textContent = "Counting lines…";
      totalLines = await countLines(picked, controller.signal);
      show();
      const replace = mode.value === "replace";
      let first = true;
      while (done.bytes < picked.size || (first && replace)) {
        const chunk = await nextChunk(picked, done.bytes, done.lines + 1);
        if (controller.signal.aborted) throw new DOMException("cancelled", "AbortError");
        inFlight = { first: done.lines + 1, last: done.lines + chunk.lines };
        // Only the first request replaces; an empty file still deletes when asked to.
        const result = await api.importLines(name, chunk.bytes, {
          mode: first && replace ? "replace" : "merge", prefix, batch: CHUNK_LINES,
          firstLine: done.lines + 1, signal: controller.signal,
        });
        inFlight = null;
        first = false;
        done.lines += chunk.lines;
        done.bytes += chunk.bytes.length;
        done.entries += result.entries;
        done.batches += result.batches;
        done.deleted += result.deleted;
        show();
        if (chunk.bytes.length === 0) break;
      }
      const deleted = replace ? `, ${count(done.deleted, "entry", "entries")} deleted first` : "";
      importMessage.show(`Imported ${picked.name} into ${name}: ` +
        `${count(done.entries, "entry", "entries")} written in ` +
        `${count(done.batches, "batch", "batches")}${deleted}.`, "ok");
    } catch (e) {
      importMessage.show(failureText(e, done, inFlight, picked.name), e.name === "AbortError"
        ? "conflict" : "error");
    } finally {
      if (importing === controller) importing = null;
      importButton.disabled = false;
      importCancel.disabled = true;
    }
  }

  // What a stopped import left written: the whole chunks answered, and what the server says
  // about the chunk it refused, or that the chunk in flight at a cancel may be written.
  function failureText(e, done, inFlight, fileName) {
    const kept = done.lines ? `lines 1-${done.lines} (${count(done.entries, "entry",
      "entries")}) were written and stay written` : "nothing was written";
    const deleted = done.deleted ? ` The replace had deleted ${count(done.deleted, "entry",
      "entries")} first.` : "";
    if (e.name === "AbortError") {
      const pending = inFlight ? ` Lines ${inFlight.first}-${inFlight.last} were on their way ` +
        "when you cancelled: the server wrote them whole, in part (whole batches) or not at " +
        "all; check before importing them again." : "";
      return `Import of ${fileName} cancelled: ${kept}.${pending}${deleted}`;
    }
    if (e instanceof ApiError && e.details && "entries" in e.details) {
      // The server's text names the bad line and what of this chunk it wrote.
      const total = done.entries + e.details.entries;
      return `Import of ${fileName} stopped: ${e.message} In all ` +
        `${count(total, "entry", "entries")} were written.${deleted}`;
    }
    return `Import of ${fileName} stopped: ${describeError(e)} Before that, ${kept}.${deleted}`;
  }
}
