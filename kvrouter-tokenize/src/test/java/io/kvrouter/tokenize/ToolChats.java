package io.kvrouter.tokenize;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;

/**
 * Seeded tool-calling conversations in OpenAI's shape, as clients send them: tools (typed
 * parameters, enums, nested objects, arrays, unicode descriptions), optional system prompts, user
 * turns with string or part-list content, assistant tool calls (one or several in parallel, their
 * arguments as a JSON string or as an object, ids of 9+ characters), tool results (string or text
 * parts, with a name), final assistant answers, unicode and emoji throughout. Used by the Jinja2
 * parity tests of this module and of the gateway (through the test jar).
 *
 * <p>Every conversation alternates user and assistant once tool calls and results are set aside,
 * ends with a user turn or tool results, and names each tool result, so that the tool templates'
 * own checks (roles alternating, one tool call at a time for Llama 3.1 JSON) reject only the
 * conversations meant to test that: {@code maxParallel} 1 keeps one call per assistant turn except
 * in about one conversation in twelve.
 */
public final class ToolChats {
  private static final String[] WORDS = {
    "the",
    "cache",
    "router",
    "weather",
    "in",
    "Zürich",
    "東京",
    "naïve",
    "café",
    "ok",
    "🙂",
    "42",
    "3.5",
    "-7",
    "\"quoted\"",
    "back\\slash",
    "tab\there",
    "a  b",
    "new\nline",
    "<tag>",
    "{braces}",
    "%s",
    "München",
    "Ελλάδα",
    "🚀🚀",
    "end.",
    "  lead",
    "trail  "
  };
  private static final String[] TOOL_NAMES = {
    "get_weather", "search_docs", "convert_currency", "book_table", "run_query"
  };

  private ToolChats() {}

  /** A conversation and its tools ({@code tools} null when it has none). */
  public record Chat(List<Object> messages, List<Object> tools, boolean addGenerationPrompt) {
    /** The chat request kvrouter renders. */
    public ChatRequest request() {
      return new ChatRequest(messages, tools, addGenerationPrompt, false, false, Map.of());
    }
  }

  /** {@code n} conversations from {@code seed}; see the class notes for {@code maxParallel}. */
  public static List<Chat> generate(long seed, int n, int maxParallel) {
    SplittableRandom r = new SplittableRandom(seed);
    List<Chat> out = new ArrayList<>(n);
    for (int i = 0; i < n; i++) out.add(chat(r, maxParallel));
    return out;
  }

  private static Chat chat(SplittableRandom r, int maxParallel) {
    List<Object> tools = r.nextInt(6) == 0 ? null : tools(r);
    List<Object> msgs = new ArrayList<>();
    if (r.nextInt(3) > 0) msgs.add(msg("role", "system", "content", text(r, 3, 12)));
    int rounds = 1 + r.nextInt(3);
    int parallel = maxParallel == 1 && r.nextInt(12) == 0 ? 2 : maxParallel;
    boolean endsWithTools = false;
    for (int k = 0; k < rounds; k++) {
      msgs.add(msg("role", "user", "content", content(r)));
      if (tools != null && r.nextInt(3) > 0) {
        List<Object> calls = new ArrayList<>();
        int ncalls = 1 + r.nextInt(parallel);
        for (int c = 0; c < ncalls; c++) calls.add(call(r, tools));
        Map<String, Object> a = msg("role", "assistant", "tool_calls", calls);
        a.put("content", r.nextBoolean() ? null : (r.nextBoolean() ? "" : text(r, 1, 6)));
        msgs.add(a);
        for (Object c : calls) {
          Map<?, ?> call = (Map<?, ?>) c;
          Map<String, Object> t = msg("role", "tool", "tool_call_id", call.get("id"));
          t.put("name", ((Map<?, ?>) call.get("function")).get("name"));
          t.put(
              "content",
              r.nextInt(4) == 0
                  ? List.of(msg("type", "text", "text", text(r, 1, 8)))
                  : r.nextBoolean() ? "{\"result\": \"" + word(r) + "\"}" : text(r, 1, 10));
          msgs.add(t);
        }
        endsWithTools = k == rounds - 1 && r.nextInt(3) == 0;
        if (endsWithTools) break;
      }
      if (k < rounds - 1) msgs.add(msg("role", "assistant", "content", text(r, 2, 14)));
    }
    return new Chat(msgs, tools, true);
  }

  private static Object content(SplittableRandom r) {
    if (r.nextInt(4) > 0) return text(r, 1, 16);
    List<Object> parts = new ArrayList<>();
    int n = 1 + r.nextInt(3);
    for (int i = 0; i < n; i++) parts.add(msg("type", "text", "text", text(r, 1, 6)));
    return parts;
  }

  private static Map<String, Object> call(SplittableRandom r, List<Object> tools) {
    Map<?, ?> tool = (Map<?, ?>) tools.get(r.nextInt(tools.size()));
    Map<?, ?> fn = (Map<?, ?>) tool.get("function");
    Map<?, ?> props = (Map<?, ?>) ((Map<?, ?>) fn.get("parameters")).get("properties");
    Map<String, Object> args = new LinkedHashMap<>();
    for (Map.Entry<?, ?> p : props.entrySet()) {
      if (r.nextInt(4) == 0) continue;
      String type = (String) ((Map<?, ?>) p.getValue()).get("type");
      args.put(
          (String) p.getKey(),
          switch (type) {
            case "integer" -> (long) (r.nextInt(2000) - 1000);
            case "number" -> Math.round(r.nextDouble() * 1000) / 8.0;
            case "boolean" -> r.nextBoolean();
            case "array" -> List.of(word(r), word(r));
            case "object" -> msg("city", word(r), "days", (long) r.nextInt(9));
            default -> text(r, 1, 4);
          });
    }
    Map<String, Object> f = new LinkedHashMap<>();
    f.put("name", fn.get("name"));
    // a JSON string as OpenAI clients send it, or an object as some do; now and then not JSON
    int form = r.nextInt(10);
    f.put(
        "arguments",
        form < 6 ? toJson(args) : form < 9 ? args : r.nextBoolean() ? "" : "{not json");
    Map<String, Object> c = new LinkedHashMap<>();
    c.put("id", "call" + Long.toString(r.nextLong() & Long.MAX_VALUE, 36));
    c.put("type", "function");
    c.put("function", f);
    return c;
  }

  private static List<Object> tools(SplittableRandom r) {
    List<Object> out = new ArrayList<>();
    int n = 1 + r.nextInt(3);
    for (int i = 0; i < n; i++) {
      Map<String, Object> props = new LinkedHashMap<>();
      props.put("location", msg("type", "string", "description", "City name, e.g. " + word(r)));
      if (r.nextBoolean()) {
        Map<String, Object> unit = msg("type", "string", "enum", List.of("celsius", "fahrenheit"));
        unit.put("description", "Unit " + word(r));
        props.put("unit", unit);
      }
      if (r.nextBoolean()) props.put("days", msg("type", "integer", "description", "How many"));
      if (r.nextBoolean()) props.put("ratio", msg("type", "number", "description", "A ratio"));
      if (r.nextBoolean()) props.put("exact", msg("type", "boolean", "description", "Exact?"));
      if (r.nextBoolean()) {
        props.put(
            "tags", msg("type", "array", "items", msg("type", "string"), "description", "Tags 🏷"));
      }
      if (r.nextInt(4) == 0) {
        props.put("filter", msg("type", "object", "description", "Nested filter"));
      }
      Map<String, Object> params = msg("type", "object", "properties", props);
      params.put("required", List.of("location"));
      Map<String, Object> fn =
          msg("name", TOOL_NAMES[(i + r.nextInt(TOOL_NAMES.length)) % TOOL_NAMES.length]);
      fn.put("description", text(r, 2, 10));
      fn.put("parameters", params);
      out.add(msg("type", "function", "function", fn));
    }
    return out;
  }

  private static String word(SplittableRandom r) {
    return WORDS[r.nextInt(WORDS.length)];
  }

  private static String text(SplittableRandom r, int min, int max) {
    int n = min + r.nextInt(max - min + 1);
    StringBuilder b = new StringBuilder();
    for (int i = 0; i < n; i++) {
      if (i > 0) b.append(' ');
      b.append(word(r));
    }
    return b.toString();
  }

  static Map<String, Object> msg(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
    return m;
  }

  /** Compact JSON of plain values (maps, lists, strings, numbers, booleans, null). */
  public static String toJson(Object v) {
    StringBuilder b = new StringBuilder();
    write(b, v);
    return b.toString();
  }

  private static void write(StringBuilder b, Object v) {
    if (v == null) {
      b.append("null");
    } else if (v instanceof String s) {
      b.append('"');
      for (int i = 0; i < s.length(); i++) {
        char c = s.charAt(i);
        switch (c) {
          case '"' -> b.append("\\\"");
          case '\\' -> b.append("\\\\");
          case '\n' -> b.append("\\n");
          case '\t' -> b.append("\\t");
          case '\r' -> b.append("\\r");
          default -> {
            if (c < 0x20) b.append(String.format("\\u%04x", (int) c));
            else b.append(c);
          }
        }
      }
      b.append('"');
    } else if (v instanceof Map<?, ?> m) {
      b.append('{');
      boolean first = true;
      for (Map.Entry<?, ?> e : m.entrySet()) {
        if (!first) b.append(',');
        first = false;
        write(b, String.valueOf(e.getKey()));
        b.append(':');
        write(b, e.getValue());
      }
      b.append('}');
    } else if (v instanceof List<?> l) {
      b.append('[');
      for (int i = 0; i < l.size(); i++) {
        if (i > 0) b.append(',');
        write(b, l.get(i));
      }
      b.append(']');
    } else {
      b.append(v); // Long, Double, Boolean
    }
  }
}
