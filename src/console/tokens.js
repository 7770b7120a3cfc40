// The Tokens page. A stub so the shell works on its own: the real page comes from its own
// change. The shell calls mount(root, ctx) with an empty element (see app.js for ctx).

import { el } from "./dom.js";

export function mount(root) {
  root.append(el("h2", { text: "Tokens" }),
    el("p", { class: "muted", text: "Tokens: not available in this build of the console." }));
}
