// check-events.mjs: validates events/v1 JSON lines against spec/events.schema.json
// (JSON Schema 2020-12, with Ajv). Usage: node check-events.mjs FILE...
// Prints one JSON line per file {file, ok, events, error}; exits 0 only if every
// line of every file is valid, 1 otherwise, 2 on a usage error.
import { readFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import Ajv2020 from "ajv/dist/2020.js";

const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("check-events: usage: node check-events.mjs FILE...");
  process.exit(2);
}
const here = dirname(fileURLToPath(import.meta.url));
const schema = JSON.parse(readFileSync(join(here, "..", "spec", "events.schema.json"), "utf8"));
const ajv = new Ajv2020({ allErrors: true, strict: true, strictRequired: false });
const validate = ajv.compile(schema);

let allOk = true;
for (const file of files) {
  const lines = readFileSync(file, "utf8").split("\n").filter((l) => l !== "");
  let error = null;
  for (let i = 0; i < lines.length && !error; i++) {
    let ev;
    try {
      ev = JSON.parse(lines[i]);
    } catch (e) {
      error = `line ${i + 1}: not JSON: ${e.message}`;
      break;
    }
    if (!validate(ev)) {
      error = `line ${i + 1}: ${ajv.errorsText(validate.errors)}`;
    }
  }
  allOk &&= error === null;
  console.log(JSON.stringify({ file, ok: error === null, events: lines.length, ...(error ? { error } : {}) }));
}
process.exit(allOk ? 0 : 1);
