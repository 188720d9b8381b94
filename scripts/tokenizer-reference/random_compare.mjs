// Differential test on random text: generates strings from a seed, encodes
// them with Hugging Face's JavaScript tokenizer, and compares with
// `q3run tokenize --jsonl`. Prints the first mismatches; exit code 1 if any.
//
//   cd scripts/tokenizer-reference && npm ci
//   node random_compare.mjs Q3RUN TOKENIZER_DIR [COUNT] [SEED]
import { Tokenizer } from "@huggingface/tokenizers";
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";

const [q3run, tokenizerDir, countArg = "2000", seedArg = "1"] = process.argv.slice(2);
if (!tokenizerDir) {
  console.error("usage: node random_compare.mjs Q3RUN TOKENIZER_DIR [COUNT] [SEED]");
  process.exit(1);
}
const readJson = (name) => JSON.parse(fs.readFileSync(path.join(tokenizerDir, name), "utf8"));
const tokenizer = new Tokenizer(readJson("tokenizer.json"), readJson("tokenizer_config.json"));

// xorshift32: the same strings for the same seed on every machine.
let state = Number(seedArg) >>> 0 || 1;
const next = () => {
  state ^= state << 13; state >>>= 0;
  state ^= state >>> 17;
  state ^= state << 5; state >>>= 0;
  return state;
};
const pick = (list) => list[next() % list.length];

// q3c's tables are Unicode 15.0 (Debian's unicode-data); node's may be newer
// (node 20.20: Unicode 17.0). A code point assigned after 15.0 is a letter
// to one and unassigned to the other, so random code points are drawn only
// among those both see alike: assigned in 15.0 (DerivedAge.txt), or still
// unassigned in node's version.
const assigned15 = [];
const derivedAge = "/usr/share/unicode/DerivedAge.txt";
if (fs.existsSync(derivedAge)) {
  for (const line of fs.readFileSync(derivedAge, "utf8").split("\n")) {
    const m = /^([0-9A-F]+)(?:\.\.([0-9A-F]+))?\s*;/.exec(line);
    if (m) assigned15.push([parseInt(m[1], 16), parseInt(m[2] ?? m[1], 16)]);
  }
}
const sameInBoth = (cp) =>
  assigned15.length === 0 ||
  assigned15.some(([lo, hi]) => cp >= lo && cp <= hi) ||
  /\p{Cn}/u.test(String.fromCodePoint(cp));
const range = (lo, hi) => {
  for (;;) {
    const cp = lo + (next() % (hi - lo + 1));
    if ((cp < 0xd800 || cp > 0xdfff) && sameInBoth(cp)) return String.fromCodePoint(cp);
  }
};

const pieces = [
  () => pick(["the", "The", "THE", "hello", "World", "naïve", "don", "I", "x", "tokenizer"]),
  () => pick(["'s", "'S", "'t", "'re", "'VE", "'m", "'ll", "'D", "'", "''", "'x", "\u2019s"]),
  () => pick([" ", "  ", "   ", "\t", "\n", "\r\n", "\n\n", " \n", "\u00a0", "\u3000", "\u2003", "\u000b", "\u0085", "\u2028"]),
  () => String(next() % 100000),
  () => pick([".", ",", "!", "?", "...", "--", "()", "{}", "[", "]", "#", "$", "%", "&&", "->", "::", "\"", "`"]),
  () => range(0x4e00, 0x9fff) + range(0x4e00, 0x9fff),
  () => range(0x3040, 0x30ff),
  () => range(0xac00, 0xd7a3),
  () => range(0x0410, 0x044f) + range(0x0410, 0x044f),
  () => range(0x0621, 0x064a) + pick(["", "\u064e", "\u0650", "\u0651\u064e"]),
  () => range(0x0905, 0x0939) + pick(["", "\u094d", "\u093e", "\u093f"]),
  () => range(0x0300, 0x036f),
  () => pick(["a\u0301", "e\u0300\u0323", "\u212b", "\u1100\u1161", "\ufb01", "\u0958"]),
  () => pick(["👍", "👍🏽", "👨‍👩‍👧", "🏳️‍🌈", "🇯🇵", "1️⃣", "❤️", "🙂"]),
  () => pick(["<|im_start|>", "<|im_end|>", "<|endoftext|>", "<think>", "</think>", "<tool_call>", "<|im_start", "|>"]),
  () => range(0x20, 0x7e),
  () => range(0x80, 0x2fff),
  () => range(0x10000, 0x10ffff),
  () => range(0xe000, 0xfffd),
  () => range(0x00, 0x1f),
];

const texts = [];
for (let i = 0; i < Number(countArg); ++i) {
  let text = "";
  const n = 1 + (next() % 12);
  for (let j = 0; j < n; ++j) text += pick(pieces)();
  texts.push(text);
}
const dir = fs.mkdtempSync(path.join(os.tmpdir(), "q3-tokcmp-"));
const input = path.join(dir, "input.jsonl");
fs.writeFileSync(input, texts.map((t) => JSON.stringify(t)).join("\n") + "\n");
const output = execFileSync(q3run, ["tokenize", "--tokenizer", tokenizerDir, "--file", input, "--jsonl"], {
  encoding: "utf8",
  maxBuffer: 1 << 28,
}).trimEnd().split("\n");
fs.rmSync(dir, { recursive: true });

let mismatches = 0;
texts.forEach((text, i) => {
  const expected = "ids: " + Array.from(tokenizer.encode(text).ids).join(" ");
  if (output[i].trimEnd() !== expected.trimEnd()) {
    if (++mismatches <= 10)
      console.log(`text ${JSON.stringify(text)}\n  expected ${expected}\n  q3run    ${output[i]}`);
  }
});
console.log(`${texts.length} random strings (seed ${seedArg}): ${mismatches} mismatches`);
process.exit(mismatches ? 1 : 0);
