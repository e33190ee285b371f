package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.fail;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;

/**
 * Runs {@code parity/jinja2_reference.py} (Python's Jinja2, as transformers renders for vLLM) on a
 * batch of cases. Without python3 or Jinja2 the calling test fails, saying what to install: CI has
 * both, so a missing reference must not pass unnoticed.
 */
public final class Jinja2Reference {
  private Jinja2Reference() {}

  /** One rendering to ask for. */
  public record Case(
      String template,
      List<Object> messages,
      List<Object> tools,
      Map<String, Object> kwargs,
      boolean addGenerationPrompt,
      Map<String, Object> special,
      String contentFormat) {}

  /** Jinja2's text, or its error ("Type: message"). */
  public record Result(String text, String error) {}

  /** The repository root (where parity/ is), from a module's working directory. */
  public static Path root() {
    Path p = Path.of("").toAbsolutePath();
    return Files.exists(p.resolve("parity")) ? p : p.getParent();
  }

  /** Renders every case with Python's Jinja2. */
  public static List<Result> render(List<Case> cases) throws IOException, InterruptedException {
    Path script = root().resolve("parity/jinja2_reference.py");
    List<Object> json = new ArrayList<>();
    for (Case c : cases) {
      Map<String, Object> m = new LinkedHashMap<>();
      m.put("template", c.template());
      m.put("messages", c.messages());
      m.put("tools", c.tools());
      m.put("kwargs", c.kwargs());
      m.put("add_generation_prompt", c.addGenerationPrompt());
      m.put("special", c.special());
      m.put("content_format", c.contentFormat());
      json.add(m);
    }
    Path in = Files.createTempFile("jinja2-cases", ".json");
    Path err = Files.createTempFile("jinja2-err", ".txt");
    Files.writeString(in, ToolChats.toJson(Map.of("cases", json)), StandardCharsets.UTF_8);
    Process p;
    try {
      p =
          new ProcessBuilder("python3", script.toString())
              .redirectInput(in.toFile())
              .redirectError(err.toFile())
              .start();
    } catch (IOException e) {
      fail(
          "the Jinja2 reference needs python3 on PATH (with Jinja2 3.1, e.g. apt-get install -y"
              + " python3-jinja2): "
              + e.getMessage());
      throw e;
    }
    byte[] out = p.getInputStream().readAllBytes();
    if (!p.waitFor(300, TimeUnit.SECONDS)) {
      p.destroyForcibly();
      fail("parity/jinja2_reference.py did not finish in 300 s");
    }
    String log = Files.readString(err);
    Files.deleteIfExists(in);
    Files.deleteIfExists(err);
    if (p.exitValue() != 0) {
      fail(
          "parity/jinja2_reference.py failed (exit "
              + p.exitValue()
              + "); it needs python3 with Jinja2 3.1 (apt-get install -y python3-jinja2):\n"
              + log);
    }
    Map<?, ?> answer;
    try (JsonParser jp = new JsonFactory().createParser(out)) {
      jp.nextToken();
      answer = (Map<?, ?>) JsonValues.read(jp);
    }
    List<Result> results = new ArrayList<>();
    for (Object o : (List<?>) answer.get("results")) {
      Map<?, ?> r = (Map<?, ?>) o;
      results.add(new Result((String) r.get("text"), (String) r.get("error")));
    }
    return results;
  }
}
