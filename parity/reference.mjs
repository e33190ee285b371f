// What kvrouter's Java side mirrors, shared by generate.mjs and js-engine.mjs: vLLM's message
// normalisation, transformers' special-token variables, vLLM's content-format detection, and
// Python's str.strip semantics for @huggingface/jinja.
import { Environment } from "@huggingface/jinja";

// vLLM's parse_chat_messages (string or "openai" content format), mirrored by ChatMessages.java.
export function normalize(messages, contentParts) {
  return messages.map((m) => {
    const out = { role: m.role };
    let texts = [];
    if (typeof m.content === "string") texts = [m.content];
    else if (Array.isArray(m.content)) texts = m.content.map((p) => (typeof p === "string" ? p : p.text));
    out.content = contentParts ? texts.map((t) => ({ type: "text", text: t })) : texts.join("\n");
    if (m.role === "assistant") {
      if (Array.isArray(m.tool_calls) && m.tool_calls.length > 0) {
        out.tool_calls = m.tool_calls.map((c) => {
          const fn = { ...c.function };
          if (typeof fn.arguments === "string" && fn.arguments.length > 0) fn.arguments = JSON.parse(fn.arguments);
          else if (!fn.arguments) fn.arguments = {};
          return { ...c, function: fn };
        });
      }
      const reasoning = m.reasoning ?? m.reasoning_content;
      if (reasoning != null) {
        out.reasoning = reasoning;
        out.reasoning_content = reasoning;
      }
    } else if (m.role === "tool" && "tool_call_id" in m) out.tool_call_id = m.tool_call_id;
    if (typeof m.name === "string") out.name = m.name;
    if (m.role === "developer") out.tools = m.tools ?? null;
    return out;
  });
}

function tokenString(v) {
  if (typeof v === "string") return v;
  if (v && typeof v === "object" && typeof v.content === "string") return v.content;
  return null;
}

// transformers' special_tokens_map, the variables apply_chat_template adds to the context.
export function specialTokenVariables(config) {
  const vars = {};
  for (const k of ["bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token"]) {
    const v = tokenString(config[k]);
    if (v != null) vars[k] = v;
  }
  if (Array.isArray(config.additional_special_tokens)) vars.additional_special_tokens = config.additional_special_tokens.map(tokenString).filter((x) => x != null);
  if (config.extra_special_tokens && typeof config.extra_special_tokens === "object") {
    for (const [k, v] of Object.entries(config.extra_special_tokens)) if (tokenString(v) != null) vars[k] = tokenString(v);
  }
  return vars;
}

// @huggingface/jinja 0.5.11 ignores the argument of str.strip/lstrip/rstrip and always strips
// whitespace; Python (which transformers and vLLM run) strips the given characters only. Qwen3's
// template calls content.lstrip('\n') and reasoning_content.strip('\n'). pythonStrip(true) gives
// the engine's string values Python's three methods (whitespace when called without an argument,
// as before); each case is rendered both ways and the count of cases that differ is printed.
const stringProto = (() => {
  const env = new Environment();
  env.set("x", "x");
  return Object.getPrototypeOf(env.lookupVariable("x"));
})();
const jsBuiltins = Object.getOwnPropertyDescriptor(stringProto, "builtins").get;
let pythonStripOn = false;
export function pythonStrip(on) {
  pythonStripOn = on;
}
function stripChars(s, chars, left, right) {
  let a = 0;
  let b = s.length;
  if (left) while (a < b && chars.includes(s[a])) a++;
  if (right) while (b > a && chars.includes(s[b - 1])) b--;
  return s.slice(a, b);
}
Object.defineProperty(stringProto, "builtins", {
  get() {
    const m = jsBuiltins.call(this);
    if (!pythonStripOn) return m;
    const patched = new Map(m);
    const FunctionValue = m.get("upper").constructor;
    const StringValue = this.constructor;
    const self = this;
    for (const [name, left, right] of [["strip", true, true], ["lstrip", true, false], ["rstrip", false, true]]) {
      const js = m.get(name);
      patched.set(name, new FunctionValue((args, scope) => {
        const chars = args[0];
        if (!chars || chars.type === "NullValue" || chars.type === "UndefinedValue") return js.value(args, scope);
        return new StringValue(stripChars(self.value, chars.value, left, right));
      }));
    }
    return patched;
  },
});

export const LOOPS_OVER_CONTENT = /for\s+\w+\s+in\s+\w+(\[\s*['"]content['"]\s*\]|\.content\b)/;

