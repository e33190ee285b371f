package io.kvrouter.tokenize;

import com.fasterxml.jackson.core.exc.StreamConstraintsException;
import io.kvrouter.tokenize.jinja.Py;
import java.io.IOException;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;

/**
 * Turns OpenAI-shape messages into what vLLM hands a chat template (vLLM's {@code
 * parse_chat_messages}): {@code role}; {@code content} as one string (text parts joined with "\n",
 * null as "") or, for templates that loop over content, as a list of {@code {"type": "text",
 * "text": ...}} parts (a tool message's content stays one string: vLLM joins a tool result's text
 * parts even then); {@code tool_calls} (assistant; {@code function.arguments} given as a string is
 * parsed as JSON, and a string that is not JSON, null or any value but an object or a list becomes
 * {}, as vLLM's _postprocess_messages does; an empty list dropped); {@code reasoning} and {@code
 * reasoning_content} (assistant); {@code tool_call_id} (tool); {@code name} and {@code task} when
 * strings; {@code tools} (developer). Anything else in a message is dropped, as vLLM drops it.
 */
final class ChatMessages {
  private ChatMessages() {}

  private static final Set<String> TEXT_PARTS =
      Set.of("text", "input_text", "output_text", "refusal", "thinking");

  static List<Object> normalize(List<?> messages, boolean contentParts) {
    List<Object> out = new ArrayList<>(messages.size());
    for (int i = 0; i < messages.size(); i++) {
      out.add(message(messages.get(i), i, contentParts));
    }
    return out;
  }

  private static Map<String, Object> message(Object o, int i, boolean contentParts) {
    String at = "messages[" + i + "]";
    if (!(o instanceof Map<?, ?> m)) {
      throw new TokenizerException(
          at + ": expected an object with role and content, got " + Py.typeName(o));
    }
    Object role = m.get("role");
    if (!(role instanceof String r) || r.isEmpty()) {
      throw new TokenizerException(at + ".role: expected a string such as \"user\"");
    }
    Map<String, Object> msg = new LinkedHashMap<>();
    msg.put("role", r);
    List<String> texts = new ArrayList<>();
    Object content = m.get("content");
    if (content instanceof String s) {
      texts.add(s);
    } else if (content instanceof List<?> parts) {
      for (int k = 0; k < parts.size(); k++) {
        texts.add(partText(parts.get(k), at + ".content[" + k + "]"));
      }
    } else if (content != null) {
      throw new TokenizerException(
          at + ".content: expected a string, a list of parts or null, got " + Py.typeName(content));
    }
    if (contentParts && !r.equals("tool")) {
      List<Object> parts = new ArrayList<>();
      for (String t : texts) {
        Map<String, Object> p = new LinkedHashMap<>();
        p.put("type", "text");
        p.put("text", t);
        parts.add(p);
      }
      msg.put("content", parts);
    } else {
      msg.put("content", String.join("\n", texts));
    }
    if (r.equals("assistant")) {
      Object calls = m.get("tool_calls");
      if (calls != null) {
        if (!(calls instanceof List<?> cl)) {
          throw new TokenizerException(at + ".tool_calls: expected a list");
        }
        if (!cl.isEmpty()) {
          msg.put("tool_calls", toolCalls(cl, at));
        }
      }
      Object reasoning =
          m.containsKey("reasoning") ? m.get("reasoning") : m.get("reasoning_content");
      if (reasoning != null) {
        msg.put("reasoning", reasoning);
        msg.put("reasoning_content", reasoning);
      }
    } else if (r.equals("tool")) {
      if (m.containsKey("tool_call_id")) {
        msg.put("tool_call_id", m.get("tool_call_id"));
      }
    }
    if (m.get("name") instanceof String n) {
      msg.put("name", n);
    }
    if (m.get("task") instanceof String task) {
      msg.put("task", task);
    }
    if (r.equals("developer")) {
      msg.put("tools", m.get("tools"));
    }
    return msg;
  }

  private static String partText(Object part, String at) {
    if (part instanceof String s) {
      return s;
    }
    if (!(part instanceof Map<?, ?> p)) {
      throw new TokenizerException(
          at + ": expected a content part object, got " + Py.typeName(part));
    }
    Object type = p.get("type");
    if (!(type instanceof String t)) {
      throw new TokenizerException(at + ".type: expected a string such as \"text\"");
    }
    if (!TEXT_PARTS.contains(t)) {
      throw new TokenizerException(
          at + ": content parts of type \"" + t + "\" are not supported (text only)");
    }
    String field = t.equals("refusal") ? "refusal" : t.equals("thinking") ? "thinking" : "text";
    Object text = p.get(field);
    if (!(text instanceof String s)) {
      throw new TokenizerException(at + "." + field + ": expected a string");
    }
    return s;
  }

  private static List<Object> toolCalls(List<?> calls, String at) {
    List<Object> out = new ArrayList<>(calls.size());
    for (int k = 0; k < calls.size(); k++) {
      String cat = at + ".tool_calls[" + k + "]";
      if (!(calls.get(k) instanceof Map<?, ?> c)) {
        throw new TokenizerException(cat + ": expected an object");
      }
      Map<String, Object> call = copy(c);
      if (!(c.get("function") instanceof Map<?, ?> fn)) {
        throw new TokenizerException(cat + ".function: expected an object with name and arguments");
      }
      Map<String, Object> f = copy(fn);
      Object args = fn.get("arguments");
      if (args instanceof String s) {
        Object parsed;
        try {
          parsed = s.isBlank() ? null : Json.parseClient(s);
        } catch (IOException e) {
          if (e.getCause() instanceof StreamConstraintsException) {
            // nested past what a client may send: refused, never walked (issue 31, #6)
            throw new TokenizerException(cat + ".function.arguments: " + e.getMessage(), e);
          }
          parsed = null; // vLLM: a string that is not JSON becomes {}
        }
        if (parsed == null && s.strip().equals("null")) f.put("arguments", null); // json.loads
        else f.put("arguments", parsed == null ? new LinkedHashMap<String, Object>() : parsed);
      } else if (!(args instanceof Map<?, ?>) && !(args instanceof List<?>)) {
        f.put("arguments", new LinkedHashMap<String, Object>());
      }
      call.put("function", f);
      out.add(call);
    }
    return out;
  }

  private static Map<String, Object> copy(Map<?, ?> m) {
    Map<String, Object> r = new LinkedHashMap<>();
    m.forEach((k, v) -> r.put(String.valueOf(k), v));
    return r;
  }
}
