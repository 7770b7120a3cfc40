// Validation of admin API answers against schemas/admin-api.schema.json, for the e2e tests.
import assert from "node:assert/strict";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const Ajv = require("ajv-draft-04");
const schema = require("../../schemas/admin-api.schema.json");
const ajv = new Ajv({ strict: false, allErrors: true });
ajv.addSchema(schema, "admin");

/** Asserts that `body` is valid as the schema's definition `definition`. */
export function validate(definition, body) {
  const check = ajv.getSchema(`admin#/definitions/${definition}`);
  assert.ok(check, `schema definition ${definition}`);
  assert.ok(check(body), `${definition}: ${ajv.errorsText(check.errors)}\n${JSON.stringify(body)}`);
}
