// Starts the S3 stand-in for tests (tests/testutil/s3_fixture.h): @20minutes/s3rver (installed
// by `npm ci` in tests/e2e) on a loopback port, with one key pair and one bucket.
//
//   node s3_standin.cjs MODULES_DIR DATA_DIR BUCKET ACCESS_KEY SECRET
//
// It listens on a port the kernel picks (port 0), or with S3_STANDIN_PORT=N on N: only the port
// an earlier stand-in of the same test got, when the e2e backup test stops the stand-in and
// starts it again where the server expects it (exits with EADDRINUSE on stderr if taken).
// Prints "listening PORT" on stdout once the server accepts connections, then runs until
// killed or until stdin closes (so it never outlives the test that started it).
//
// s3rver verifies SigV4 signatures against the key pair set here (a wrong secret gets 403
// SignatureDoesNotMatch). It does not check the body of a PUT: it streams the body into the
// object file as it arrives (an upload cut short leaves a partial object) and ignores
// Content-MD5 and x-amz-content-sha256. S3 stores an object only once the whole body arrived
// and rejects a body whose digests do not match (IncompleteBody, BadDigest,
// XAmzContentSHA256Mismatch). The middleware below adds those checks in front of s3rver, so
// the stand-in keeps S3's all-or-nothing PUT and the tests see when our digests are wrong.
'use strict';

const crypto = require('node:crypto');
const path = require('node:path');
const { PassThrough } = require('node:stream');
const { createRequire } = require('node:module');

const [modulesDir, dataDir, bucket, accessKey, secret] = process.argv.slice(2);
if (!secret) {
  console.error('usage: s3_standin.cjs MODULES_DIR DATA_DIR BUCKET ACCESS_KEY SECRET');
  process.exit(2);
}
const requireFromModules = createRequire(path.join(modulesDir, 'package.json'));
const S3rver = requireFromModules('@20minutes/s3rver');
const AWSAccount = requireFromModules('@20minutes/s3rver/lib/models/account');

// Only our key pair is known to the server.
AWSAccount.DUMMY_ACCOUNT.revokeAccessKey('S3RVER');
AWSAccount.DUMMY_ACCOUNT.createKeyPair(accessKey, secret);

function s3Error(ctx, status, code, message) {
  ctx.status = status;
  ctx.type = 'application/xml';
  ctx.body =
    '<?xml version="1.0" encoding="UTF-8"?>\n' +
    `<Error><Code>${code}</Code><Message>${message}</Message></Error>`;
}

// Reads the whole body of a PUT before s3rver sees it; an upload that ends early never
// reaches the store.
async function wholePutBody(ctx, next) {
  if (ctx.method !== 'PUT') return next();
  const expected = Number(ctx.get('Content-Length'));
  const chunks = [];
  let received = 0;
  const complete = await new Promise((resolve) => {
    ctx.req.on('data', (chunk) => {
      chunks.push(chunk);
      received += chunk.length;
    });
    ctx.req.on('end', () => resolve(true));
    ctx.req.on('aborted', () => resolve(false));
    ctx.req.on('error', () => resolve(false));
  });
  if (!complete || (ctx.get('Content-Length') !== '' && received !== expected)) {
    console.error(`incomplete PUT ${ctx.path}: ${received} of ${expected} bytes`);
    return s3Error(ctx, 400, 'IncompleteBody', 'The request body terminated unexpectedly');
  }
  const body = Buffer.concat(chunks);
  const md5 = ctx.get('Content-MD5');
  if (md5 && crypto.createHash('md5').update(body).digest('base64') !== md5) {
    return s3Error(ctx, 400, 'BadDigest', 'The Content-MD5 you specified did not match what we received.');
  }
  const sha = ctx.get('x-amz-content-sha256');
  if (/^[0-9a-fA-F]{64}$/.test(sha) &&
      crypto.createHash('sha256').update(body).digest('hex') !== sha.toLowerCase()) {
    return s3Error(ctx, 400, 'XAmzContentSHA256Mismatch',
        "The provided 'x-amz-content-sha256' header does not match what was computed.");
  }
  // s3rver reads the body from ctx.req.
  const replay = new PassThrough();
  replay.headers = ctx.req.headers;
  replay.end(body);
  ctx.req = replay;
  return next();
}

async function main() {
  const server = new S3rver({
    address: '127.0.0.1',
    port: Number(process.env.S3_STANDIN_PORT || 0),  // 0: the kernel's choice
    silent: true,
    directory: dataDir,
    vhostBuckets: false,
    configureBuckets: [{ name: bucket }],
  });
  // Koa composes its middleware when it starts listening: ours goes first.
  server.middleware.unshift(wholePutBody);
  const address = await server.run();
  console.log(`listening ${address.port}`);
  process.stdin.resume();
  process.stdin.on('end', () => process.exit(0));
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
