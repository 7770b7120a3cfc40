// node push_receiver.mjs PORT SECRET [SECRET2]: a push delivery receiver for the C++ integration
// test (tests/testutil/webhook_receiver.h). Verifies each request with `standardwebhooks`
// (push_verify.mjs), answers 204 or 401, prints "listening PORT" on stdout once it accepts
// connections and one line per request on stderr; exits when its stdin closes.
import { startPushReceiver } from "./push_verify.mjs";

const [portArg, ...secrets] = process.argv.slice(2);
const receiver = await startPushReceiver({ secrets, port: Number(portArg ?? 0) });
const seen = receiver.received;
const log = () => {
  while (seen.length > 0) {
    const r = seen.shift();
    process.stderr.write(r.ok ? `ok ${r.id} attempt ${r.attempt}\n` : `refused: ${r.error}\n`);
  }
};
setInterval(log, 50).unref();
process.stdout.write(`listening ${receiver.port}\n`);
process.stdin.on("end", () => process.exit(0));
process.stdin.on("error", () => process.exit(0));
process.stdin.resume();
