package io.kvrouter.tokenize;

import io.kvrouter.tokenize.jinja.Template;
import io.kvrouter.tokenize.jinja.TemplateException;
import java.time.ZonedDateTime;
import java.util.Map;
import java.util.function.Supplier;
import java.util.regex.Pattern;

/**
 * A chat template (Jinja2 source from a model's {@code tokenizer_config.json} or {@code
 * chat_template.jinja}), parsed once and rendered as transformers' {@code apply_chat_template}
 * renders it. Safe to render from many threads at once.
 *
 * <p>A template that does not parse, or raises, or fails while rendering is a {@link
 * TokenizerException} whose message names the model and the template line, for example {@code chat
 * template of gemma3, line 17: Conversation roles must alternate
 * user/assistant/user/assistant/...}.
 */
public final class ChatTemplate {
  /** vLLM's "openai" content format: the template loops over a message's content parts. */
  private static final Pattern LOOPS_OVER_CONTENT =
      Pattern.compile("for\\s+\\w+\\s+in\\s+\\w+(\\[\\s*['\"]content['\"]\\s*\\]|\\.content\\b)");

  private final String model;
  private final String source;
  private final Template template;
  private final boolean contentParts;
  private final Supplier<ZonedDateTime> clock;

  private ChatTemplate(
      String model, String source, Template template, Supplier<ZonedDateTime> clock) {
    this.model = model;
    this.source = source;
    this.template = template;
    this.contentParts = LOOPS_OVER_CONTENT.matcher(source).find();
    this.clock = clock;
  }

  /** Parses a template; {@code model} names it in error messages. */
  public static ChatTemplate compile(String model, String source) {
    return compile(model, source, ZonedDateTime::now);
  }

  /** Parses a template whose {@code strftime_now} reads {@code clock} (for tests). */
  public static ChatTemplate compile(String model, String source, Supplier<ZonedDateTime> clock) {
    try {
      return new ChatTemplate(model, source, Template.parse(source), clock);
    } catch (TemplateException e) {
      throw new TokenizerException(
          "chat template of "
              + model
              + " does not parse, line "
              + e.line()
              + ": "
              + e.getMessage()
              + lineText(source, e.line()));
    }
  }

  /** Renders the template with these variables (messages, add_generation_prompt, ...). */
  public String render(Map<String, Object> context) {
    try {
      return template.render(context, clock);
    } catch (TemplateException e) {
      String what = e.raised() ? " raised an error" : " failed";
      throw new TokenizerException(
          "chat template of "
              + model
              + what
              + ", line "
              + e.line()
              + ": "
              + e.getMessage()
              + lineText(source, e.line()));
    } catch (StackOverflowError e) {
      throw new TokenizerException("chat template of " + model + " recursed too deeply");
    }
  }

  /**
   * Whether the template iterates over a message's {@code content}, so that vLLM hands it content
   * as a list of parts ({@code [{"type": "text", "text": ...}]}) rather than one string.
   */
  public boolean wantsContentParts() {
    return contentParts;
  }

  /** The template's source. */
  public String source() {
    return source;
  }

  private static String lineText(String source, int line) {
    String[] lines = source.split("\n", -1);
    if (line < 1 || line > lines.length) {
      return "";
    }
    String l = lines[line - 1].strip();
    if (l.length() > 160) {
      l = l.substring(0, 157) + "...";
    }
    return l.isEmpty() ? "" : " [" + l + "]";
  }
}
