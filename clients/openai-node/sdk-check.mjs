// Runs the official OpenAI JavaScript SDK against an OpenAI-compatible server and prints a JSON
// summary on stdout: a completion and a chat completion, each unstreamed and streamed (with
// stream_options.include_usage), `--concurrency N` times each at once.
//
//   node sdk-check.mjs <baseURL> <model> [--api-key KEY] [--concurrency N] [--max-tokens N]
//
// baseURL is the server's /v1 root, e.g. http://127.0.0.1:8000/v1. Exit 0 when every call
// succeeded and read its usage, 1 otherwise, 2 on bad arguments.
import OpenAI from "openai";

function usage(msg) {
  console.error(`sdk-check.mjs: ${msg}`);
  console.error("usage: node sdk-check.mjs <baseURL> <model> [--api-key KEY] [--concurrency N] [--max-tokens N]");
  process.exit(2);
}

const args = process.argv.slice(2);
const positional = [];
const opts = { apiKey: process.env.OPENAI_API_KEY || "none", concurrency: 1, maxTokens: 8 };
for (let i = 0; i < args.length; i++) {
  const a = args[i];
  if (a === "--api-key") opts.apiKey = args[++i];
  else if (a === "--concurrency") opts.concurrency = Number(args[++i]);
  else if (a === "--max-tokens") opts.maxTokens = Number(args[++i]);
  else if (a.startsWith("--")) usage(`unknown option ${a}`);
  else positional.push(a);
}
if (positional.length !== 2) usage("expected <baseURL> and <model>");
if (!(opts.concurrency >= 1) || !(opts.maxTokens >= 1)) usage("--concurrency and --max-tokens must be >= 1");
const [baseURL, model] = positional;
const client = new OpenAI({ baseURL, apiKey: opts.apiKey, maxRetries: 0, timeout: 60_000 });
const messages = [{ role: "user", content: "hello there" }];

const ops = {
  async completion() {
    const r = await client.completions.create({ model, prompt: "hello there", max_tokens: opts.maxTokens });
    return { id: r.id, object: r.object, text: r.choices[0].text, finish_reason: r.choices[0].finish_reason, usage: r.usage, chunks: 0 };
  },
  async completion_stream() {
    const s = await client.completions.create({
      model, prompt: "hello there", max_tokens: opts.maxTokens, stream: true, stream_options: { include_usage: true },
    });
    let text = "", finish = null, usage = null, chunks = 0, id = null, object = null;
    for await (const c of s) {
      chunks++;
      id = c.id; object = c.object;
      if (c.choices.length > 0) {
        text += c.choices[0].text;
        if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
      }
      if (c.usage) usage = c.usage;
    }
    return { id, object, text, finish_reason: finish, usage, chunks };
  },
  async chat() {
    const r = await client.chat.completions.create({ model, messages, max_completion_tokens: opts.maxTokens });
    const c = r.choices[0];
    return { id: r.id, object: r.object, text: c.message.content, role: c.message.role, finish_reason: c.finish_reason, usage: r.usage, chunks: 0 };
  },
  async chat_stream() {
    const s = await client.chat.completions.create({
      model, messages, max_completion_tokens: opts.maxTokens, stream: true, stream_options: { include_usage: true },
    });
    let text = "", finish = null, usage = null, chunks = 0, id = null, object = null, role = null;
    for await (const c of s) {
      chunks++;
      id = c.id; object = c.object;
      if (c.choices.length > 0) {
        const d = c.choices[0].delta;
        if (d.role) role = d.role;
        if (d.content) text += d.content;
        if (c.choices[0].finish_reason) finish = c.choices[0].finish_reason;
      }
      if (c.usage) usage = c.usage;
    }
    return { id, object, text, role, finish_reason: finish, usage, chunks };
  },
};

const results = [];
const errors = [];
for (const [name, op] of Object.entries(ops)) {
  const runs = await Promise.allSettled(Array.from({ length: opts.concurrency }, () => op()));
  for (const r of runs) {
    if (r.status === "fulfilled") {
      const v = r.value;
      if (!v.usage || typeof v.usage.prompt_tokens !== "number" || typeof v.usage.completion_tokens !== "number") {
        errors.push({ op: name, error: "no usage in the response" });
      }
      results.push({ op: name, ...v });
    } else {
      const e = r.reason;
      errors.push({ op: name, error: String(e && e.message ? e.message : e), status: e && e.status });
    }
  }
}
const models = await client.models.list().then((p) => p.data.map((m) => m.id), (e) => { errors.push({ op: "models", error: String(e.message || e) }); return []; });
console.log(JSON.stringify({ ok: errors.length === 0, sdk: "openai", models, results, errors }));
process.exit(errors.length === 0 ? 0 : 1);
