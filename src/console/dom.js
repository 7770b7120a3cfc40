// DOM helpers. Text always goes in through text nodes (textContent), never as markup; event
// handlers are attached with addEventListener, never as attributes (the page's CSP forbids inline
// script and style, and these helpers refuse to write either).

export const $ = (id) => document.getElementById(id);

// el("tr", {class: "row", dataset: {key: "…"}, on: {click: f}}, child, "text", …)
export function el(tag, props = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(props)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "text") {
      node.textContent = String(v);
    } else if (k === "class") {
      node.className = v;
    } else if (k === "dataset") {
      Object.assign(node.dataset, v);
    } else if (k === "on") {
      for (const [event, fn] of Object.entries(v)) node.addEventListener(event, fn);
    } else if (k === "style" || /^on/i.test(k)) {
      throw new Error(`refusing to set the attribute ${k}`);
    } else {
      node.setAttribute(k, v === true ? "" : String(v));
    }
  }
  append(node, ...children);
  return node;
}

export function append(node, ...children) {
  for (const c of children.flat()) {
    if (c === null || c === undefined || c === false) continue;
    node.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return node;
}

export function clear(node) {
  node.replaceChildren();
  return node;
}

export function setText(node, text) {
  node.textContent = text ?? "";
  return node;
}

export function show(node, visible = true) {
  node.hidden = !visible;
  return node;
}

// Sets a message line: kind "" (plain), "ok", "error" or "conflict" (a CSS class).
export function message(node, text, kind = "") {
  node.textContent = text ?? "";
  node.className = `message ${kind}`.trim();
  node.hidden = !text;
  return node;
}
