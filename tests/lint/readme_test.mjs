// README.md stays navigable: every in-page link `](#anchor)` names a heading (GitHub's anchor
// rules: lower case, punctuation dropped, spaces to hyphens, repeats numbered), every `##`
// section is listed in the table of contents, and the quick-start commands stay the first
// thing a reader meets. ctest readme_links (label unit).
import { test } from "node:test";
import assert from "node:assert/strict";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const README = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../README.md");
const text = fs.readFileSync(README, "utf8");

/** Headings outside code blocks: {level, title, anchor}. */
function headings(md) {
  const out = [];
  const seen = new Map();
  let fenced = false;
  for (const line of md.split("\n")) {
    if (line.startsWith("```")) fenced = !fenced;
    const m = !fenced && /^(#{1,6}) (.*)$/.exec(line);
    if (!m) continue;
    let anchor = m[2].toLowerCase().replace(/[^\p{L}\p{N}\- _]/gu, "").replace(/ /g, "-");
    const n = seen.get(anchor) ?? 0;
    seen.set(anchor, n + 1);
    if (n > 0) anchor += `-${n}`;
    out.push({ level: m[1].length, title: m[2], anchor });
  }
  return out;
}

test("every in-page link names a heading", () => {
  const anchors = new Set(headings(text).map((h) => h.anchor));
  const broken = [...text.matchAll(/\]\(#([^)]+)\)/g)].map((m) => m[1]).filter((a) => !anchors.has(a));
  assert.deepEqual([...new Set(broken)], []);
});

test("the table of contents lists every section", () => {
  const m = /\n## Contents\n([\s\S]*?)\n## /.exec(text);
  assert.ok(m, "a ## Contents section");
  const listed = new Set([...m[1].matchAll(/\]\(#([^)]+)\)/g)].map((x) => x[1]));
  const sections = headings(text).filter((h) => h.level === 2 && h.title !== "Contents");
  assert.deepEqual(sections.filter((h) => !listed.has(h.anchor)).map((h) => h.title), []);
});

test("the quick start comes first, with its two commands", () => {
  const first = headings(text).find((h) => h.level === 2);
  assert.match(first.title, /^Quick start/);
  const quick = text.slice(text.indexOf(`## ${first.title}`));
  const block = /```sh\n([\s\S]*?)```/.exec(quick)[1];
  assert.match(block, /^deploy\/dev\.sh run\b/m);
  assert.match(block, /^deploy\/dev\.sh test\b/m);
  assert.ok(quick.indexOf("```sh") < quick.indexOf("## Contents"), "the commands come before the contents");
});
