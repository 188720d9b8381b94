// Writes the reference ids of q3c's tokenizer tests with an independent
// implementation: Hugging Face's JavaScript tokenizers (@huggingface/tokenizers,
// pinned in package.json; it translates the tokenizer.json regex to
// Oniguruma's semantics and normalizes with String.prototype.normalize).
//
//   cd scripts/tokenizer-reference && npm ci
//   node encode.mjs TOKENIZER_DIR STRINGS.json OUT.json
//
// STRINGS.json is [{category, text}]; OUT.json gets [{category, text, ids}].
// The committed outputs: tests/text/data/tokenizer_reference.json from
// tests/text/data/tokenizer_strings.json and models/qwen3-tokenizer.
import { Tokenizer } from "@huggingface/tokenizers";
import fs from "node:fs";
import path from "node:path";

const [tokenizerDir, stringsPath, outPath] = process.argv.slice(2);
if (!outPath) {
  console.error("usage: node encode.mjs TOKENIZER_DIR STRINGS.json OUT.json");
  process.exit(1);
}
const readJson = (name) => JSON.parse(fs.readFileSync(path.join(tokenizerDir, name), "utf8"));
const tokenizer = new Tokenizer(readJson("tokenizer.json"), readJson("tokenizer_config.json"));
const cases = JSON.parse(fs.readFileSync(stringsPath, "utf8")).map(({ category, text }) => ({
  category,
  text,
  ids: Array.from(tokenizer.encode(text).ids),
}));
const lines = cases.map((c) => "  " + JSON.stringify(c));
fs.writeFileSync(outPath, "[\n" + lines.join(",\n") + "\n]\n");
console.log(`${cases.length} strings -> ${outPath}`);
