// Unit tests of deploy.ts without a server: the path Deno.openKv resolves from
// DENO_KV_DEFAULT_PATH and DENO_KV_PATH_PREFIX, which paths are KV Connect, the queue API BASE
// of each KV Connect URL shape, and (with --unstable-kv) that a local database keeps Deno's own
// queue methods once the module is imported.
// Run: deno test --unstable-kv deploy_test.ts   (against kvconnect: tests/e2e/deploy_queue.test.mjs)
import { isKvConnectPath, queueBaseFor, queueBaseOf, resolveKvPath } from "./deploy.ts";

function assertEq(got: unknown, want: unknown, what: string) {
  if (got !== want) throw new Error(`${what}: got ${JSON.stringify(got)}, want ${JSON.stringify(want)}`);
}

Deno.test("resolveKvPath: as Deno's MultiBackendDbHandler", () => {
  const host = "http://kv.example:4512";
  const cases: [string | undefined, Record<string, string>, string | undefined][] = [
    [undefined, {}, undefined],
    [undefined, { DENO_KV_DEFAULT_PATH: host }, host],
    [undefined, { DENO_KV_DEFAULT_PATH: "" }, undefined], // an empty default is no default
    ["x.db", { DENO_KV_DEFAULT_PATH: host }, "x.db"], // a path wins over the default
    ["sales", { DENO_KV_PATH_PREFIX: `${host}/databases/` }, `${host}/databases/sales`],
    // the prefix goes in front of every path: the default path, a URL, ":memory:"
    [undefined, { DENO_KV_DEFAULT_PATH: "b", DENO_KV_PATH_PREFIX: `${host}/databases/` }, `${host}/databases/b`],
    [":memory:", { DENO_KV_PATH_PREFIX: "/tmp/" }, "/tmp/:memory:"],
    [undefined, { DENO_KV_PATH_PREFIX: `${host}/` }, undefined], // no path: no prefix
    ["a", { DENO_KV_PATH_PREFIX: "" }, "a"],
    [`${host}/databases/x/connect`, {}, `${host}/databases/x/connect`],
  ];
  for (const [path, env, want] of cases) {
    assertEq(resolveKvPath(path, env), want, `resolveKvPath(${path}, ${JSON.stringify(env)})`);
  }
});

Deno.test("isKvConnectPath: http:// and https:// only, as Deno tests them", () => {
  assertEq(isKvConnectPath("http://h"), true, "http");
  assertEq(isKvConnectPath("https://h/databases/a/connect"), true, "https");
  for (const p of [undefined, ":memory:", "./kv.sqlite", "/tmp/kv", "HTTP://h", "ftp://h", "httpx"]) {
    assertEq(isKvConnectPath(p), false, String(p));
  }
});

Deno.test("queueBaseFor: every KV Connect URL shape", () => {
  const cases: [string, string][] = [
    ["http://127.0.0.1:4512", "http://127.0.0.1:4512"],
    ["http://127.0.0.1:4512/", "http://127.0.0.1:4512"],
    ["https://kv.example", "https://kv.example"],
    ["https://kv.example:443/", "https://kv.example"],
    ["http://h:1/databases/orders/connect", "http://h:1/databases/orders"],
    ["http://h:1/databases/orders/connect/", "http://h:1/databases/orders"],
    ["http://h:1/databases/orders", "http://h:1/databases/orders"],
    [
      "http://h:1/databases/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
      "http://h:1/databases/0190a1b2-c3d4-7e5f-8a9b-0c1d2e3f4a5b",
    ],
    ["https://api.example/v2/databases/abc-123/connect", "https://api.example/databases/abc-123"],
    ["https://api.example/v2/databases/abc-123", "https://api.example/databases/abc-123"],
    ["http://h:1/databases/my%20db/connect", "http://h:1/databases/my%20db"],
    ["http://h:1/databases/x/connect?a=1#f", "http://h:1/databases/x"],
    // behind a proxy that keeps a path prefix: the prefix stays
    ["https://edge.example/kv/databases/x/connect", "https://edge.example/kv/databases/x"],
    ["https://edge.example/kv/v2/databases/x/connect", "https://edge.example/kv/databases/x"],
    // no known shape: the URL itself is BASE
    ["http://h:1/kv", "http://h:1/kv"],
    ["http://h:1/databases", "http://h:1/databases"],
    ["http://h:1/databases/a/b/connect", "http://h:1/databases/a/b/connect"],
  ];
  for (const [url, want] of cases) assertEq(queueBaseFor(url), want, url);
  let threw = false;
  try {
    queueBaseFor("file:///tmp/x");
  } catch (e) {
    threw = e instanceof TypeError;
  }
  assertEq(threw, true, "a file URL is refused");
});

Deno.test({
  name: "a local database keeps Deno's own queue (needs --unstable-kv)",
  ignore: typeof Deno.openKv !== "function",
  async fn() {
    const kv = await Deno.openKv(":memory:");
    assertEq(queueBaseOf(kv), undefined, "not routed");
    const got: unknown[] = [];
    const listening = kv.listenQueue((m) => {
      got.push(m);
    });
    await kv.enqueue({ n: 1 });
    const deadline = Date.now() + 10_000;
    while (got.length < 1 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    assertEq(JSON.stringify(got), '[{"n":1}]', "delivered by Deno's local queue");
    kv.close();
    await listening;
  },
});
