#!/usr/bin/env python3
"""Renders chats with Python's Jinja2, as vLLM hands them to transformers' apply_chat_template.

The second reference of kvrouter's chat rendering (the first is @huggingface/jinja in Node):
Jinja2 is what transformers and vLLM run, so where the two references disagree this one wins.
Needs only the standard library and Jinja2 (3.1.x); no transformers, no tokenizers.

Input (stdin): a JSON object {"cases": [case, ...]}; each case has
  template          the chat template's source
  messages          OpenAI-shape messages, as a client sends them
  tools             a list, or null
  kwargs            chat_template_kwargs (an object)
  add_generation_prompt
  special           the special-token variables (bos_token, eos_token, ...)
  content_format    "auto", "string" or "openai" (vLLM's --chat-template-content-format)
Output (stdout): a JSON list, per case {"text": rendered} or {"error": "Type: message"}.

What it does, in order (the facts are vLLM's and transformers'; the code is written here):
 1. content format: "auto" is "openai" when the template loops over a message's content
    (`for x in <a messages loop variable>.content` or ['content'], found in Jinja2's syntax tree,
    following assignments from `messages`), else "string";
 2. messages as vLLM's parse_chat_messages leaves them: content a string (text parts joined with
    "\n", null as "") or, for "openai", a list of {"type": "text", "text"} parts (a tool message's
    content stays a string); assistant tool_calls kept, an empty list dropped, each
    function.arguments string parsed as JSON ({} when it is not JSON; null or a value that is not
    an object or a list also {}); reasoning kept (as reasoning and reasoning_content); tool_call_id
    on tool messages; name and task when strings; tools on developer messages;
 3. render in transformers' environment: ImmutableSandboxedEnvironment(trim_blocks=True,
    lstrip_blocks=True, extensions=[loopcontrols]), its tojson filter (json.dumps,
    ensure_ascii=False), raise_exception, strftime_now; variables messages, tools, documents
    (None), add_generation_prompt and the special tokens and kwargs (kwargs over special tokens;
    a "chat_template" kwarg is not a variable).
"""
import datetime
import json
import sys

import jinja2
import jinja2.nodes as nodes
from jinja2.exceptions import TemplateError
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise TemplateError(message)


def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators,
                      sort_keys=sort_keys)


def strftime_now(fmt):
    return datetime.datetime.now().strftime(fmt)


ENV = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                    extensions=[loopcontrols])
ENV.filters["tojson"] = tojson
ENV.globals["raise_exception"] = raise_exception
ENV.globals["strftime_now"] = strftime_now

TEXT_PARTS = {"text": "text", "input_text": "text", "output_text": "text",
              "refusal": "refusal", "thinking": "thinking"}


def _names_bound_to(tree, root):
    """root and every name assigned (transitively) from it, or from a slice/filter of it."""
    bound = {root}
    changed = True
    while changed:
        changed = False
        for a in tree.find_all(nodes.Assign):
            if isinstance(a.target, nodes.Name) and a.target.name not in bound \
                    and _reads(a.node, bound):
                bound.add(a.target.name)
                changed = True
    return bound


def _reads(node, names, key=None):
    """Whether node is one of names (or its [key]/.key), possibly filtered, tested or sliced."""
    while isinstance(node, (nodes.Filter, nodes.Test)) or (
            isinstance(node, nodes.Getitem) and isinstance(node.arg, nodes.Slice)):
        node = node.node
        if node is None:
            return False
    if key is None:
        return isinstance(node, nodes.Name) and node.ctx == "load" and node.name in names
    if isinstance(node, nodes.Getitem):
        return isinstance(node.arg, nodes.Const) and node.arg.value == key \
            and _reads(node.node, names)
    if isinstance(node, nodes.Getattr):
        return node.attr == key and _reads(node.node, names)
    return False


def content_format(template, given):
    if given != "auto":
        return given
    try:
        tree = ENV.parse(template)
    except Exception:
        return "string"
    lists = _names_bound_to(tree, "messages")
    items = set()
    for loop in tree.find_all(nodes.For):
        if isinstance(loop.target, nodes.Name) and _reads(loop.iter, lists):
            items.add(loop.target.name)
    for loop in tree.find_all(nodes.For):
        if _reads(loop.iter, items, "content"):
            return "openai"
    return "string"


def normalize(messages, fmt):
    out = []
    for m in messages:
        role = m["role"]
        content = m.get("content")
        texts = []
        if isinstance(content, str):
            texts = [content]
        elif isinstance(content, list):
            for p in content:
                if isinstance(p, str):
                    texts.append(p)
                else:
                    texts.append(p[TEXT_PARTS[p["type"]]])
        msg = {"role": role}
        if fmt == "openai" and role != "tool":
            msg["content"] = [{"type": "text", "text": t} for t in texts]
        else:
            msg["content"] = "\n".join(texts)
        if role == "assistant":
            calls = m.get("tool_calls")
            if calls is not None and len(calls) > 0:
                kept = []
                for c in calls:
                    c = dict(c)
                    fn = dict(c["function"])
                    args = fn.get("arguments")
                    if isinstance(args, str):
                        try:
                            fn["arguments"] = json.loads(args)
                        except json.JSONDecodeError:
                            fn["arguments"] = {}
                    elif not isinstance(args, (dict, list)):
                        fn["arguments"] = {}
                    c["function"] = fn
                    kept.append(c)
                msg["tool_calls"] = kept
            reasoning = m.get("reasoning", m.get("reasoning_content"))
            if reasoning is not None:
                msg["reasoning"] = reasoning
                msg["reasoning_content"] = reasoning
        elif role == "tool" and "tool_call_id" in m:
            msg["tool_call_id"] = m["tool_call_id"]
        if isinstance(m.get("name"), str):
            msg["name"] = m["name"]
        if isinstance(m.get("task"), str):
            msg["task"] = m["task"]
        if role == "developer":
            msg["tools"] = m.get("tools")
        out.append(msg)
    return out


def render(case):
    template = case["template"]
    fmt = content_format(template, case.get("content_format", "auto"))
    variables = dict(case.get("special") or {})
    variables.update(case.get("kwargs") or {})
    variables.pop("chat_template", None)
    variables.update(messages=normalize(case["messages"], fmt), tools=case.get("tools"),
                     documents=None,
                     add_generation_prompt=case.get("add_generation_prompt", True))
    return ENV.from_string(template).render(**variables)


def main():
    cases = json.load(sys.stdin)["cases"]
    out = []
    for c in cases:
        try:
            out.append({"text": render(c)})
        except Exception as e:  # the template's own errors, as the Java side must give one too
            out.append({"error": type(e).__name__ + ": " + str(e)})
    json.dump({"jinja2": jinja2.__version__, "results": out}, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
