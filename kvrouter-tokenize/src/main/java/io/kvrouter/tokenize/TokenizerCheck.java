package io.kvrouter.tokenize;

import io.kvrouter.tokenize.jinja.Py;
import java.io.PrintWriter;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * The parity self-check: renders and tokenizes a built-in set of probe conversations and prompts
 * locally and through an engine's {@code /tokenize}, and reports each probe's first differing
 * token. {@code ./kvrouter tokenizer check --model-dir DIR --engine URL} runs it.
 *
 * <pre>
 * Implementation notes
 *
 * The probes cover what drifts in the field: system prompts, multi-turn history, unicode and
 * emoji, whitespace runs, code, numbers, text containing the model's own special-token strings,
 * content as a list of parts, tool calls and tool results (with tools), no generation prompt,
 * and plain prompts with and without special tokens. A probe both sides reject (e.g. a role the
 * template refuses) counts as agreeing; one side rejecting is a mismatch. Single-threaded; the
 * report goes to the given writer.
 * </pre>
 */
public final class TokenizerCheck {

  /** The outcome: how many probes ran, agreed and differed. */
  public record Report(int probes, int matched, int mismatched) {}

  private record Probe(String name, ChatRequest chat, String prompt, boolean addSpecialTokens) {}

  private TokenizerCheck() {}

  private static Map<String, Object> msg(String role, Object content) {
    Map<String, Object> m = new LinkedHashMap<>();
    m.put("role", role);
    m.put("content", content);
    return m;
  }

  private static List<Probe> probes(Tokenizer tok) {
    String specials = tok.specialTokens().eos() == null ? "<|im_end|>" : tok.specialTokens().eos();
    List<Probe> p = new ArrayList<>();
    p.add(chat("one user turn", List.of(msg("user", "Hello! How are you?"))));
    p.add(
        chat(
            "system and user",
            List.of(
                msg("system", "You are a helpful assistant."),
                msg("user", "Summarise KV caching in one line."))));
    p.add(chat("ten-plus turns", manyTurns()));
    p.add(
        chat(
            "unicode and emoji",
            List.of(
                msg("user", "héllo wörld — 日本語, Привет, مرحبا 🎉👍🏽👨‍👩‍👧‍👦 🇫🇷 e\u0301"))));
    p.add(
        chat(
            "whitespace runs",
            List.of(msg("user", "  leading\n\n\ttabs   and    spaces\r\n\n\n trailing   "))));
    p.add(
        chat(
            "code",
            List.of(
                msg(
                    "user",
                    "```python\ndef f(x):\n    return {'a': x ** 2}\n```\nWhat does it return for 12345678901?"))));
    p.add(
        chat(
            "special-token text",
            List.of(
                msg(
                    "user",
                    "Please print the literal "
                        + specials
                        + " and <|im_start|> and <s></s> for me."))));
    p.add(
        chat(
            "content parts",
            List.of(
                obj(
                    "role",
                    "user",
                    "content",
                    List.of(
                        obj("type", "text", "text", "first part"),
                        obj("type", "text", "text", "second part"))))));
    p.add(toolCall());
    p.add(
        new Probe(
            "no generation prompt",
            ChatRequest.of(List.of(msg("user", "Hi"), msg("assistant", "Hello there.")))
                .withAddGenerationPrompt(false),
            null,
            false));
    p.add(
        new Probe(
            "prompt with special tokens",
            null,
            "The quick brown fox jumps over the lazy dog. 1234567",
            true));
    p.add(
        new Probe("prompt without special tokens", null, "  Ünïcödé, emoji 🤖 and\ttabs\n", false));
    return p;
  }

  /** A system turn and six question-answer pairs, then a last question. */
  private static List<Object> manyTurns() {
    List<Object> multi = new ArrayList<>();
    multi.add(msg("system", "Answer briefly."));
    for (int i = 0; i < 6; i++) {
      multi.add(msg("user", "Question " + i + ": what is " + i + " * 7?"));
      multi.add(msg("assistant", "It is " + (i * 7) + "."));
    }
    multi.add(msg("user", "And the sum of all of them?"));
    return multi;
  }

  /** An assistant's tool call and the tool's result, with the tool's definition. */
  private static Probe toolCall() {
    Map<String, Object> call = new LinkedHashMap<>();
    call.put("id", "call_1");
    call.put("type", "function");
    call.put("function", obj("name", "get_weather", "arguments", "{\"city\": \"Paris\"}"));
    Map<String, Object> assistantCall = msg("assistant", null);
    assistantCall.put("tool_calls", List.of(call));
    Map<String, Object> toolResult = msg("tool", "{\"temp_c\": 21}");
    toolResult.put("tool_call_id", "call_1");
    toolResult.put("name", "get_weather"); // Hermes-style templates require it
    List<Object> tools =
        List.of(
            obj(
                "type",
                "function",
                "function",
                obj(
                    "name", "get_weather",
                    "description", "Current weather in a city",
                    "parameters",
                        obj(
                            "type", "object",
                            "properties", obj("city", obj("type", "string")),
                            "required", List.of("city")))));
    return new Probe(
        "tool call and result",
        ChatRequest.of(List.of(msg("user", "Weather in Paris?"), assistantCall, toolResult))
            .withTools(tools),
        null,
        false);
  }

  /**
   * A JSON object with its keys in the order given, as a client sends them: a template that prints
   * it (tojson) and an engine that re-serializes it in OpenAI's order must agree, whatever order a
   * Map.of would iterate in.
   */
  private static Map<String, Object> obj(Object... kv) {
    Map<String, Object> m = new LinkedHashMap<>();
    for (int i = 0; i < kv.length; i += 2) m.put((String) kv[i], kv[i + 1]);
    return m;
  }

  private static Probe chat(String name, List<?> messages) {
    return new Probe(name, ChatRequest.of(messages), null, false);
  }

  /**
   * Runs every probe against the engine and prints one line per probe and a summary. The engine's
   * dialect is probed first ({@link EngineTokenizer#api()}): each chat is rendered locally as that
   * engine renders a chat request ({@link EngineDialect#asRendered}), which is how the gateway
   * tokenizes the requests it routes to it.
   *
   * @throws EngineTokenizer.UnreachableException when the engine cannot be reached
   */
  public static Report run(Tokenizer tok, EngineTokenizer engine, PrintWriter out) {
    int matched = 0, mismatched = 0;
    EngineDialect dialect = engine.dialect();
    out.println("engine " + engine.base() + ": " + engine.api().describe());
    List<Probe> probes = probes(tok);
    for (Probe probe : probes) {
      int[] local = null, remote = null;
      String localError = null, remoteError = null;
      try {
        local =
            probe.chat() != null
                ? tok.applyChatTemplate(dialect.asRendered(probe.chat())).ids()
                : tok.encode(probe.prompt(), probe.addSpecialTokens());
      } catch (TokenizerException e) {
        localError = e.getMessage();
      }
      try {
        remote =
            probe.chat() != null
                ? engine.tokenizeChat(probe.chat()).tokens()
                : engine.tokenizePrompt(probe.prompt(), probe.addSpecialTokens()).tokens();
      } catch (EngineTokenizer.UnreachableException e) {
        throw e;
      } catch (TokenizerException e) {
        remoteError = e.getMessage();
      }
      String line;
      boolean ok;
      if (localError != null && remoteError != null) {
        ok = true;
        line = "ok (both reject it)   " + probe.name() + ": " + localError;
      } else if (localError != null) {
        ok = false;
        line =
            "MISMATCH  "
                + probe.name()
                + ": the engine tokenizes it ("
                + remote.length
                + " tokens) but kvrouter cannot: "
                + localError;
      } else if (remoteError != null) {
        ok = false;
        line =
            "MISMATCH  "
                + probe.name()
                + ": kvrouter tokenizes it ("
                + local.length
                + " tokens) but the engine fails: "
                + remoteError;
      } else if (Arrays.equals(local, remote)) {
        ok = true;
        line = "ok        " + probe.name() + " (" + local.length + " tokens)";
      } else {
        ok = false;
        line = "MISMATCH  " + probe.name() + ": " + firstDifference(tok, local, remote);
      }
      out.println(line);
      if (ok) {
        matched++;
      } else {
        mismatched++;
      }
    }
    out.println(
        probes.size()
            + " probes: "
            + matched
            + " match, "
            + mismatched
            + " differ ("
            + tok.directory()
            + " against "
            + engine.base()
            + ")");
    out.flush();
    return new Report(probes.size(), matched, mismatched);
  }

  /** "first differing token at index i: kvrouter 123 'foo' vs engine 456 'bar' ..." */
  static String firstDifference(Tokenizer tok, int[] local, int[] remote) {
    int i = 0;
    while (i < Math.min(local.length, remote.length) && local[i] == remote[i]) {
      i++;
    }
    String l =
        i < local.length
            ? local[i] + " " + Py.repr(tok.decode(new int[] {local[i]}, false))
            : "(end)";
    String r =
        i < remote.length
            ? remote[i] + " " + Py.repr(tok.decode(new int[] {remote[i]}, false))
            : "(end)";
    String before = Py.repr(tok.decode(Arrays.copyOfRange(local, Math.max(0, i - 8), i), false));
    return "first differing token at index "
        + i
        + ": kvrouter "
        + l
        + " vs engine "
        + r
        + " (kvrouter "
        + local.length
        + " tokens, engine "
        + remote.length
        + "; after "
        + before
        + ")";
  }
}
