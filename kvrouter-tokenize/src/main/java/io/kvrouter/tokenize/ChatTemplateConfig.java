package io.kvrouter.tokenize;

import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.InvalidPathException;
import java.nio.file.Path;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import org.jspecify.annotations.Nullable;

/**
 * How an engine was told to render chats, in vLLM's terms: {@code --chat-template} (the template
 * that replaces the model's own), {@code --chat-template-content-format} and {@code
 * --default-chat-template-kwargs}. {@link Tokenizer#load(Path, long, ChatTemplateConfig)} renders
 * with it.
 *
 * <p>{@link #loadTemplate} reads a {@code --chat-template} value as vLLM does: the contents of the
 * file it names when that file can be read; otherwise, when the value holds one of {@code {}} or a
 * newline, the value itself is the template; otherwise it is a path that could not be read, an
 * error (vLLM would also look in its own package's template directory, which kvrouter does not
 * have: give the file).
 *
 * @param template the template's text, or null for the model's own
 * @param origin where the template came from, for messages (a path, or "--chat-template"); null
 *     when {@code template} is null
 * @param contentFormat how message content is handed to the template
 * @param defaultKwargs template variables every request gets unless it sets them itself in {@code
 *     chat_template_kwargs} (a request value of null or "auto" does not override)
 * @param excludeToolsWhenToolChoiceNone vLLM's {@code --exclude-tools-when-tool-choice-none}: a
 *     chat completion with {@code tool_choice: "none"} renders without its {@code tools}
 */
public record ChatTemplateConfig(
    @Nullable String template,
    @Nullable String origin,
    ContentFormat contentFormat,
    Map<String, Object> defaultKwargs,
    boolean excludeToolsWhenToolChoiceNone) {

  /**
   * vLLM's message when a request carries {@code chat_template} (or {@code
   * chat_template_kwargs.chat_template}) and the server was not started with {@code
   * --trust-request-chat-template}; answered with HTTP 400.
   */
  public static final String UNTRUSTED_REQUEST_TEMPLATE =
      "Chat template is passed with request, but --trust-request-chat-template is not set. "
          + "Refused request with untrusted chat template.";

  /** vLLM's {@code --chat-template-content-format}. */
  public enum ContentFormat {
    /** Detected from the template: "openai" when it loops over a message's content. */
    AUTO,
    /** Content is one string (text parts joined with "\n"). */
    STRING,
    /** Content is a list of {@code {"type": "text", "text": ...}} parts. */
    OPENAI;

    /** The flag's value ({@code auto}, {@code string}, {@code openai}). */
    public static ContentFormat parse(String v) {
      for (ContentFormat f : values()) {
        if (f.name().toLowerCase(Locale.ROOT).equals(v)) return f;
      }
      throw new IllegalArgumentException(
          "--chat-template-content-format: expected auto, string or openai, got '" + v + "'");
    }

    /** The flag's spelling. */
    public String wireName() {
      return name().toLowerCase(Locale.ROOT);
    }
  }

  /** Settings that render a request's tools whatever its {@code tool_choice} (vLLM's default). */
  public ChatTemplateConfig(
      @Nullable String template,
      @Nullable String origin,
      ContentFormat contentFormat,
      Map<String, Object> defaultKwargs) {
    this(template, origin, contentFormat, defaultKwargs, false);
  }

  public ChatTemplateConfig {
    contentFormat = contentFormat == null ? ContentFormat.AUTO : contentFormat;
    defaultKwargs =
        defaultKwargs == null
            ? Map.of()
            : Collections.unmodifiableMap(new LinkedHashMap<>(defaultKwargs));
    if (template != null && origin == null) origin = "--chat-template";
    if (template == null) origin = null;
  }

  /** The model's own template, content format auto, no default kwargs (vLLM's defaults). */
  public static ChatTemplateConfig defaults() {
    return new ChatTemplateConfig(null, null, ContentFormat.AUTO, Map.of());
  }

  /** Whether this is {@link #defaults()}. */
  public boolean isDefault() {
    return template == null
        && contentFormat == ContentFormat.AUTO
        && defaultKwargs.isEmpty()
        && !excludeToolsWhenToolChoiceNone;
  }

  /**
   * The tools {@code req} renders with: none when this excludes them for its {@code tool_choice:
   * "none"} (vLLM's {@code --exclude-tools-when-tool-choice-none}), else its own.
   */
  public @Nullable List<?> toolsOf(ChatRequest req) {
    return excludeToolsWhenToolChoiceNone && req.toolChoiceNone() ? null : req.tools();
  }

  /** {@code req} as it renders: without its tools when {@link #toolsOf} drops them. */
  public ChatRequest applyToolChoice(ChatRequest req) {
    return req.tools() != null && toolsOf(req) == null ? req.withTools(null) : req;
  }

  /** The same settings with {@code --exclude-tools-when-tool-choice-none} on or off. */
  public ChatTemplateConfig withExcludeToolsWhenToolChoiceNone(boolean v) {
    return new ChatTemplateConfig(template, origin, contentFormat, defaultKwargs, v);
  }

  /**
   * The same settings with the template a {@code --chat-template} value names (see the class
   * notes); null keeps this one's.
   */
  public ChatTemplateConfig withTemplate(String pathOrTemplate) {
    if (pathOrTemplate == null) return this;
    String text = loadTemplate(pathOrTemplate);
    String from = text == pathOrTemplate ? "--chat-template" : pathOrTemplate;
    return new ChatTemplateConfig(
        text, from, contentFormat, defaultKwargs, excludeToolsWhenToolChoiceNone);
  }

  /** The same settings with this content format. */
  public ChatTemplateConfig withContentFormat(ContentFormat f) {
    return new ChatTemplateConfig(
        template, origin, f, defaultKwargs, excludeToolsWhenToolChoiceNone);
  }

  /** The same settings with these default kwargs. */
  public ChatTemplateConfig withDefaultKwargs(Map<String, Object> kwargs) {
    return new ChatTemplateConfig(
        template, origin, contentFormat, kwargs, excludeToolsWhenToolChoiceNone);
  }

  /**
   * A {@code --chat-template} value's template: the file's text, or the value itself (see the class
   * notes). Returns the same String instance when the value is the template.
   *
   * @throws IllegalArgumentException for a value that looks like a path that cannot be read
   */
  public static String loadTemplate(String pathOrTemplate) {
    IOException failure;
    try {
      return Files.readString(Path.of(pathOrTemplate), StandardCharsets.UTF_8);
    } catch (IOException e) {
      failure = e;
    } catch (InvalidPathException e) {
      failure = new IOException(e.getMessage());
    }
    if (pathOrTemplate.indexOf('{') >= 0
        || pathOrTemplate.indexOf('}') >= 0
        || pathOrTemplate.indexOf('\n') >= 0) {
      return pathOrTemplate;
    }
    throw new IllegalArgumentException(
        "--chat-template "
            + pathOrTemplate
            + ": looks like a file path, but it cannot be read ("
            + failure
            + "); give a readable file or the template itself (text with {{ }} or {% %})");
  }

  /**
   * A {@code --default-chat-template-kwargs} value: a JSON object.
   *
   * @throws IllegalArgumentException for anything else
   */
  @SuppressWarnings("unchecked")
  public static Map<String, Object> parseKwargs(String json) {
    Object v;
    try {
      v = Json.parse(json);
    } catch (IOException e) {
      throw new IllegalArgumentException(
          "--default-chat-template-kwargs: not valid JSON: " + e.getMessage(), e);
    }
    if (!(v instanceof Map<?, ?> m)) {
      throw new IllegalArgumentException(
          "--default-chat-template-kwargs: expected a JSON object such as"
              + " '{\"enable_thinking\": false}'");
    }
    return (Map<String, Object>) m;
  }

  /**
   * The template variables of a request: these defaults, then the request's own kwargs over them (a
   * request value of null or "auto" leaves the default, as vLLM's merge does).
   */
  Map<String, Object> mergeKwargs(Map<String, Object> request) {
    if (defaultKwargs.isEmpty()) return request;
    Map<String, Object> out = new LinkedHashMap<>(defaultKwargs);
    request.forEach(
        (k, v) -> {
          if (v != null && !"auto".equals(v)) out.put(k, v);
        });
    return out;
  }
}
