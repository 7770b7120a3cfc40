// A KvValueJSON as a collapsible tree: objects, arrays, Maps, Sets and errors open and close,
// long ones show their first items and a "show more" button; byte values (typed arrays,
// ArrayBuffer, DataView, v8) can be downloaded. Text only, through dom.js.

import { el } from "./dom.js";
import { decodeBase64, describeValue } from "./kv.js";

const PAGE = 50;            // children shown at first, and per "show more"
const OPEN_BELOW = 20;      // containers with at most this many children start open (depth > 0)

const BYTE_TYPES = new Set(["ArrayBuffer", "DataView", "Int8Array", "Uint8Array",
  "Uint8ClampedArray", "Int16Array", "Uint16Array", "Int32Array", "Uint32Array", "Float16Array",
  "Float32Array", "Float64Array", "BigInt64Array", "BigUint64Array", "v8"]);

function download(name, bytes) {
  const url = URL.createObjectURL(new Blob([bytes], { type: "application/octet-stream" }));
  el("a", { href: url, download: name }).click();
  setTimeout(() => URL.revokeObjectURL(url), 60_000);
}

// [label, value] pairs of a container's children, or null for a leaf.
function childrenOf(x) {
  if (!x || typeof x !== "object") return null;
  switch (x.type) {
    case "Array":
      return Array.isArray(x.value) ? x.value.map((v, i) => [String(i), v ?? { type: "hole" }]) : null;
    case "object":
      return Object.entries(x.value ?? {});
    case "Map":
      return x.value.map(([k, v]) => [describeValue(k, 60), v]);
    case "Set":
      return x.value.map((v, i) => [String(i), v]);
    case "HostObject":
      return [["value", x.value]];
    default:
      if (/Error$/.test(x.type) && x.value && typeof x.value === "object") {
        const out = [];
        if (x.value.message !== undefined) out.push(["message", { type: "string", value: x.value.message }]);
        if (x.value.cause) out.push(["cause", x.value.cause]);
        if (x.value.stack !== undefined) out.push(["stack", { type: "string", value: x.value.stack }]);
        return out.length ? out : null;
      }
      return null;
  }
}

function summary(x, n) {
  switch (x.type) {
    case "Array": return `Array(${n})`;
    case "object": return n ? `{…} ${n} ${n === 1 ? "property" : "properties"}` : "{}";
    case "Map": return `Map(${n})`;
    case "Set": return `Set(${n})`;
    default: return x.type;
  }
}

// A leaf: its short rendering, and a download button for bytes.
function leaf(x, fileName) {
  const text = el("span", { class: "tree-leaf", text: describeValue(x, 400) });
  if (!BYTE_TYPES.has(x.type) || typeof x.value !== "string") return text;
  return el("span", {}, text, " ", el("button", {
    type: "button", class: "small download", text: "Download",
    title: "Save these bytes as a file",
    on: { click: () => download(fileName, decodeBase64(x.value)) },
  }));
}

function node(label, x, depth, fileName) {
  const kids = childrenOf(x);
  const head = label === null ? [] : [el("span", { class: "tree-key", text: label }), ": "];
  if (!kids) return el("div", { class: "tree-row" }, head, leaf(x, fileName));
  const box = el("details", { class: "tree-node" });
  box.open = depth === 0 || kids.length <= OPEN_BELOW;
  box.append(el("summary", {}, head, el("span", { class: "tree-type", text: summary(x, kids.length) })));
  const list = el("div", { class: "tree-children" });
  box.append(list);
  let shown = 0;
  const more = el("button", { type: "button", class: "small show-more" });
  const showMore = () => {
    const next = kids.slice(shown, shown + PAGE);
    for (const [k, v] of next) list.append(node(k, v, depth + 1, fileName));
    shown += next.length;
    more.remove();
    if (shown < kids.length) {
      more.textContent = `Show ${Math.min(PAGE, kids.length - shown)} more (${kids.length - shown} left)`;
      list.append(more);
    }
  };
  more.addEventListener("click", showMore);
  // Children are built when first opened, so a huge value costs nothing until looked at.
  if (box.open) showMore();
  else box.addEventListener("toggle", () => { if (box.open && shown === 0) showMore(); });
  return box;
}

// The tree of a whole value. `fileName` names downloads.
export function valueTree(value, fileName = "value.bin") {
  return el("div", { class: "tree" }, node(null, value, 0, fileName));
}
