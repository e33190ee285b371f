// A stand-in engine for trying './kvrouter tokenizer check' without a GPU: answers vLLM's
// POST /tokenize (chat and completion forms) and GET /v1/models with Hugging Face's JavaScript
// implementation (@huggingface/jinja with Python's str.strip semantics, as in generate.mjs, and
// @lenml/tokenizers). Listens on 127.0.0.1 only.
//
//   node parity/js-engine.mjs FAMILY PORT     e.g. node parity/js-engine.mjs qwen3 8011
import http from "node:http";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { Template } from "@huggingface/jinja";
import { TokenizerLoader } from "@lenml/tokenizers";
import { normalize, specialTokenVariables, LOOPS_OVER_CONTENT, pythonStrip } from "./reference.mjs";

const [family, port] = [process.argv[2], Number(process.argv[3] ?? 8011)];
const dir = path.join(path.dirname(fileURLToPath(import.meta.url)), "node_modules", "@lenml", `tokenizer-${family}`, "models");
const tokenizerJson = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
const config = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
const tokenizer = TokenizerLoader.fromPreTrained({ tokenizerJSON: tokenizerJson, tokenizerConfig: config });
const template = new Template(config.chat_template);
const contentParts = LOOPS_OVER_CONTENT.test(config.chat_template);
pythonStrip(true);

function answer(res, status, body) {
  res.writeHead(status, { "Content-Type": "application/json" });
  res.end(JSON.stringify(body));
}

http
  .createServer((req, res) => {
    if (req.method === "GET" && req.url === "/v1/models") return answer(res, 200, { object: "list", data: [{ id: family, object: "model" }] });
    if (req.method !== "POST" || req.url !== "/tokenize") return answer(res, 404, { error: "not found" });
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      try {
        const b = JSON.parse(body);
        let ids;
        if (Array.isArray(b.messages)) {
          const text = template.render({
            ...specialTokenVariables(config),
            ...(b.chat_template_kwargs ?? {}),
            messages: normalize(b.messages, contentParts),
            tools: b.tools ?? null,
            documents: null,
            add_generation_prompt: b.add_generation_prompt ?? true,
          });
          ids = tokenizer.encode(text, { add_special_tokens: b.add_special_tokens ?? false });
        } else {
          ids = tokenizer.encode(b.prompt, { add_special_tokens: b.add_special_tokens ?? true });
        }
        answer(res, 200, { count: ids.length, max_model_len: config.model_max_length ?? 0, tokens: ids });
      } catch (e) {
        answer(res, 400, { object: "error", message: String(e.message ?? e), code: 400 });
      }
    });
  })
  .listen(port, "127.0.0.1", () => console.log(`js-engine: ${family} on http://127.0.0.1:${port}`));
