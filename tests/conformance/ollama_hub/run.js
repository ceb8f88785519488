// eosfix's own driver of the Hub's packages (installed by `npm ci` from this folder's lock).
//
// Reads one JSON object on stdin and writes one JSON object on stdout:
//   {"convert": [{chat_template, bos_token?, eos_token?}, ...]}
//       -> {"convert": [result, ...]}: convertGGUFTemplateToOllama's answer for each, null
//          when it returns undefined, {"error": message} when it throws;
//   {"labels": ["file.gguf", ...]} -> {"labels": [label or null, ...]}: parseGGUFQuantLabel;
//   {"table": true} -> {"table": [...]}: the package's template table
//          (OLLAMA_CHAT_TEMPLATE_MAPPING, which it does not export: its bundle is loaded with
//          one line added that exports it), for tools/gen_ollama_hubmap.py.
// The clock is pinned (EOSFIX_FAKE_NOW, default 2025-07-10T12:00:00Z) before the packages
// load: templates that print today's date (strftime_now) render the same on every run.
"use strict";
const fs = require("fs");
const Module = require("module");
const path = require("path");

const fixed = Date.parse(process.env.EOSFIX_FAKE_NOW || "2025-07-10T12:00:00Z");
const RealDate = Date;
global.Date = class extends RealDate {
  constructor(...args) {
    super(...(args.length ? args : [fixed]));
  }
  static now() {
    return fixed;
  }
};

function table() {
  const file = require.resolve("@huggingface/ollama-utils");
  const source = fs.readFileSync(file, "utf8");
  const m = new Module(file, module);
  m.filename = file;
  m.paths = Module._nodeModulePaths(path.dirname(file));
  m._compile(source + "\nmodule.exports.__eosfixTable = OLLAMA_CHAT_TEMPLATE_MAPPING;\n", file);
  return m.exports.__eosfixTable;
}

let input = "";
process.stdin.setEncoding("utf8");
process.stdin.on("data", (d) => (input += d));
process.stdin.on("end", () => {
  const ask = JSON.parse(input);
  const out = {};
  if (ask.convert) {
    const { convertGGUFTemplateToOllama } = require("@huggingface/ollama-utils");
    out.convert = ask.convert.map((gguf) => {
      try {
        const r = convertGGUFTemplateToOllama(gguf);
        return r === undefined ? null : r;
      } catch (e) {
        return { error: String(e && e.message ? e.message : e) };
      }
    });
  }
  if (ask.labels) {
    const { parseGGUFQuantLabel } = require("@huggingface/tasks");
    out.labels = ask.labels.map((name) => parseGGUFQuantLabel(name) ?? null);
  }
  if (ask.table) {
    out.table = table();
  }
  process.stdout.write(JSON.stringify(out) + "\n");
});
