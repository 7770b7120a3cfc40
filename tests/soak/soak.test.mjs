// node:test entry point of the soak test (soak.mjs); options come from the environment
// (SOAK_SECONDS etc., see README.md), e.g.
//   KVCONNECT_BIN=build/kvconnect SOAK_SECONDS=60 node --test tests/soak/
import { test } from "node:test";
import { resolveOptions, runSoak, watchdogMs } from "./soak.mjs";

const opts = resolveOptions([]);

test(
  `soak: ${opts.seconds} s, ${opts.connections} connections x ${opts["watches-per-conn"]} watches, churn and writes`,
  { timeout: watchdogMs(opts) + 10_000 },
  async () => {
    await runSoak(opts);
  },
);
