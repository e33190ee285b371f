// Reference renderings and token ids for kvrouter-tokenize's TokenizerParityTest.
//
//   node parity/generate.mjs OUT_DIR [CASES_PER_KIND]
//
// For each model family (real tokenizer files from the @lenml/tokenizer-* packages), generates
// CASES_PER_KIND (default 300) seeded conversations and as many plain prompts, renders each
// conversation with Hugging Face's chat-template engine (@huggingface/jinja) given the context
// transformers' apply_chat_template passes, tokenizes with @lenml/tokenizers (a copy of
// transformers.js' tokenizers), and writes OUT_DIR/<family>.json. Messages are normalised as vLLM
// normalises them before it renders (content parts joined with "\n", tool-call arguments parsed
// from JSON, ...), the same rules kvrouter's ChatMessages applies; the raw messages go into the
// file so that the Java side normalises them itself.
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";
import { TokenizerLoader } from "@lenml/tokenizers";
import { normalize, specialTokenVariables, LOOPS_OVER_CONTENT, pythonStrip } from "./reference.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const outDir = process.argv[2];
const perKind = Number(process.argv[3] ?? 300);
if (!outDir) {
  console.error("usage: node generate.mjs OUT_DIR [CASES_PER_KIND]");
  process.exit(2);
}
fs.mkdirSync(outDir, { recursive: true });

const FAMILIES = {
  qwen3: { tools: true, toolRole: true, strictAlternation: false, systemFirstOnly: false },
  llama3_1: { tools: false, toolRole: true, strictAlternation: false, systemFirstOnly: false },
  deepseek_v3: { tools: false, toolRole: true, strictAlternation: false, systemFirstOnly: false },
  gemma3: { tools: false, toolRole: false, strictAlternation: true, systemFirstOnly: true },
};

// mulberry32: small seeded PRNG, so every run writes the same cases.
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const WORDS = (
  "the router sends each request to the engine whose cache already holds its prefix so that " +
  "prefill is short and time to first token stays low while load is spread across workers " +
  "tokens blocks hashes events index score overlap cache eviction memory latency throughput"
).split(" ");
const UNICODE = [
  "héllo wörld", "naïve café", "Ünïcödé", "日本語のテキスト", "中文字符测试", "한국어 문장",
  "Привет, мир", "مرحبا بالعالم", "שלום עולם", "Ελληνικά", "हिन्दी पाठ", "ไทย",
  "𝔘𝔫𝔦𝔠𝔬𝔡𝔢", "e\u0301", "ﬁ ligature", "Ａｂｃ１２３", "½ ¾ ∞ ≠ ≤", "…", "«quotes»", "“smart” ‘quotes’",
];
const EMOJI = ["🎉", "👍🏽", "👨‍👩‍👧‍👦", "🇫🇷", "❤️", "🤖", "😀😃😄", "🧪", "✅", "🔥🔥"];
const CODE = [
  "def f(x):\n    return x * 2\n",
  "for (int i = 0; i < n; i++) {\n\tsum += a[i];\n}",
  "SELECT id, name FROM users WHERE age > 30;",
  "const x = { a: 1, b: [2, 3] };\nconsole.log(x?.a ?? 0);",
  "```python\nprint('hi')\n```",
  "<div class=\"x\">&amp; &lt;tag&gt;</div>",
  "#include <stdio.h>\nint main() { return 0; }",
  "{\"key\": \"value\", \"n\": 42}",
];
const WHITESPACE = [" ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", " \n ", "\r\n", "    ", "\t\t", " \t "];

function specialStrings(tokenizerJson) {
  const all = tokenizerJson.added_tokens.map((t) => t.content).filter((c) => c.length > 1);
  // the first 40 (the chat markers live there) and a few partial ones
  const some = all.slice(0, 40);
  return some.concat(some.slice(0, 5).map((s) => s.slice(0, Math.max(1, s.length - 2))));
}

function makeText(r, specials, maxParts) {
  const pick = (a) => a[Math.floor(r() * a.length)];
  const n = 1 + Math.floor(r() * maxParts);
  let s = "";
  for (let i = 0; i < n; i++) {
    const k = r();
    if (k < 0.35) {
      const m = 1 + Math.floor(r() * 12);
      const w = [];
      for (let j = 0; j < m; j++) w.push(pick(WORDS));
      s += (r() < 0.3 ? w.join(" ").replace(/^./, (c) => c.toUpperCase()) + "." : w.join(" "));
    } else if (k < 0.48) s += pick(UNICODE);
    else if (k < 0.56) s += pick(EMOJI);
    else if (k < 0.66) s += pick(CODE);
    else if (k < 0.76) s += String(Math.floor(r() * 1e9)) + (r() < 0.5 ? "." + Math.floor(r() * 1000) : "");
    else if (k < 0.86) s += pick(specials);
    else s += pick(WHITESPACE);
    if (r() < 0.6) s += r() < 0.7 ? " " : pick(WHITESPACE);
  }
  if (r() < 0.15) s = pick(WHITESPACE) + s;
  if (r() < 0.15) s = s + pick(WHITESPACE);
  return s;
}

const TOOLS = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Get the weather in a city",
      parameters: {
        type: "object",
        properties: { city: { type: "string", description: "City name" }, unit: { type: "string", enum: ["c", "f"] } },
        required: ["city"],
      },
    },
  },
  {
    type: "function",
    function: {
      name: "search",
      description: "Search the web — returns «snippets»",
      parameters: { type: "object", properties: { q: { type: "string" }, n: { type: "integer" } }, required: ["q"] },
    },
  },
];

function makeConversation(r, fam, specials, caseNo) {
  const spec = FAMILIES[fam];
  const msgs = [];
  const turns = 1 + Math.floor(r() * 12);
  if (r() < 0.4) msgs.push({ role: "system", content: makeText(r, specials, 3) });
  let tools = null;
  if (spec.tools && r() < 0.3) tools = TOOLS.slice(0, 1 + Math.floor(r() * 2));
  let expectUser = true;
  for (let t = 0; t < turns; t++) {
    if (expectUser) {
      let content = makeText(r, specials, 4);
      if (r() < 0.15) {
        // content as a list of text parts
        const parts = [{ type: "text", text: content }];
        if (r() < 0.5) parts.push({ type: "text", text: makeText(r, specials, 2) });
        content = parts;
      }
      const m = { role: "user", content };
      if (r() < 0.05) m.name = "alice";
      msgs.push(m);
    } else {
      const useTool = spec.toolRole && r() < 0.25;
      if (useTool) {
        const n = 1 + Math.floor(r() * 2);
        const calls = [];
        for (let i = 0; i < n; i++) {
          calls.push({
            id: `call_${caseNo}_${t}_${i}`,
            type: "function",
            function: { name: i % 2 ? "search" : "get_weather", arguments: JSON.stringify(i % 2 ? { q: makeText(r, [], 1).slice(0, 40), n: 3 } : { city: "Paris", unit: "c" }) },
          });
        }
        const content = r() < 0.5 ? null : makeText(r, specials, 2);
        msgs.push({ role: "assistant", content, tool_calls: calls });
        for (let i = 0; i < n; i++) {
          msgs.push({ role: "tool", tool_call_id: calls[i].id, content: makeText(r, specials, 2) });
        }
        // the conversation goes on with the assistant reading the tool results
        msgs.push({ role: "assistant", content: makeText(r, specials, 3) });
      } else {
        let content = makeText(r, specials, 4);
        if (fam === "qwen3" && r() < 0.2) content = "<think>\n" + makeText(r, [], 2) + "\n</think>\n\n" + content;
        msgs.push({ role: "assistant", content });
      }
    }
    expectUser = !expectUser;
  }
  if (!spec.strictAlternation && r() < 0.1 && msgs.length > 2) {
    // a second system message in the middle (templates that allow it)
    msgs.splice(1 + Math.floor(r() * (msgs.length - 1)), 0, { role: "system", content: makeText(r, specials, 2) });
  }
  const addGenerationPrompt = msgs[msgs.length - 1].role !== "assistant" || r() < 0.3;
  const kwargs = fam === "qwen3" && r() < 0.2 ? { enable_thinking: false } : {};
  return { messages: msgs, tools, add_generation_prompt: addGenerationPrompt, chat_template_kwargs: kwargs };
}

let seed = 20251201;
for (const fam of Object.keys(FAMILIES)) {
  const started = Date.now();
  const dir = path.join(here, "node_modules", "@lenml", `tokenizer-${fam}`, "models");
  const tokenizerJson = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
  const config = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
  const tokenizer = TokenizerLoader.fromPreTrained({ tokenizerJSON: tokenizerJson, tokenizerConfig: config });
  const template = new Template(config.chat_template);
  const contentParts = LOOPS_OVER_CONTENT.test(config.chat_template);
  const specials = specialStrings(tokenizerJson);
  const vars = specialTokenVariables(config);
  const r = rng(seed++);
  const cases = [];
  let stripDiffers = 0;
  for (let i = 0; i < perKind; i++) {
    const c = makeConversation(r, fam, specials, i);
    const context = {
      ...vars,
      ...c.chat_template_kwargs,
      messages: normalize(c.messages, contentParts),
      tools: c.tools,
      documents: null,
      add_generation_prompt: c.add_generation_prompt,
    };
    const entry = { id: `${fam}-chat-${i}`, kind: "chat", ...c };
    try {
      pythonStrip(false);
      let jsText = null;
      try {
        jsText = template.render(context);
      } catch (e) {
        jsText = null;
      }
      pythonStrip(true);
      entry.text = template.render(context);
      if (jsText !== entry.text) stripDiffers++;
      entry.ids = tokenizer.encode(entry.text, { add_special_tokens: false });
    } catch (e) {
      entry.error = String(e.message ?? e);
    }
    cases.push(entry);
  }
  for (let i = 0; i < perKind; i++) {
    const prompt = makeText(r, specials, 8);
    const addSpecial = r() < 0.7;
    cases.push({ id: `${fam}-prompt-${i}`, kind: "prompt", prompt, add_special_tokens: addSpecial, ids: tokenizer.encode(prompt, { add_special_tokens: addSpecial }) });
  }
  // the templates' own error paths: a role order the template rejects
  if (FAMILIES[fam].strictAlternation) {
    cases.push({ id: `${fam}-reject-0`, kind: "chat", messages: [{ role: "user", content: "a" }, { role: "user", content: "b" }], tools: null, add_generation_prompt: true, chat_template_kwargs: {}, error: "raise" });
  }
  fs.writeFileSync(path.join(outDir, `${fam}.json`), JSON.stringify({ family: fam, modelDir: dir, cases }));
  console.log(
    `parity: ${fam}: ${cases.length} cases in ${Date.now() - started} ms` +
      ` (${stripDiffers} rendered differently by the unpatched str.strip/lstrip/rstrip)`,
  );
}
