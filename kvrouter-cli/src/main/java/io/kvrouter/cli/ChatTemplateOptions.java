package io.kvrouter.cli;

import io.kvrouter.tokenize.ChatTemplateConfig;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.jspecify.annotations.Nullable;
import picocli.CommandLine.Option;

/**
 * vLLM's chat-template flags, with vLLM's names and meanings, shared by {@code gateway}, {@code
 * mock-engine} and {@code tokenizer check} as a picocli mixin: {@code --chat-template} (a file or
 * the template itself; on the gateway also {@code NAME=...} for one {@code --model}), {@code
 * --chat-template-content-format}, {@code --default-chat-template-kwargs} and {@code
 * --exclude-tools-when-tool-choice-none}. {@link #common} and {@link #perModel} turn them into the
 * library's {@link ChatTemplateConfig}; a bad value is an IllegalArgumentException (a usage error).
 */
final class ChatTemplateOptions {
  @Option(
      names = "--chat-template",
      paramLabel = "FILE|TEMPLATE",
      description =
          "The chat template the engines were started with (vLLM's --chat-template): a file, or"
              + " the template itself (a value with {, } or a newline that is no readable file)."
              + " It replaces the model's own template. On the gateway, NAME=FILE|TEMPLATE sets it"
              + " for --model NAME only (repeatable, one per model).")
  List<String> chatTemplates = new ArrayList<>();

  @Option(
      names = "--chat-template-content-format",
      paramLabel = "auto|string|openai",
      description =
          "How message content reaches the template (vLLM's flag): string, a list of"
              + " {type: text} parts (openai), or auto: openai when the template loops over a"
              + " message's content (default: ${DEFAULT-VALUE}).")
  String contentFormat = "auto";

  @Option(
      names = "--default-chat-template-kwargs",
      paramLabel = "JSON",
      description =
          "Template variables every request gets unless it sets them in chat_template_kwargs"
              + " (vLLM's flag), e.g. '{\"enable_thinking\": false}'.")
  String defaultKwargs;

  @Option(
      names = "--exclude-tools-when-tool-choice-none",
      description =
          "A chat completion with tool_choice \"none\" renders without its tools (vLLM's flag):"
              + " give it when the engines were started with it.")
  boolean excludeToolsWhenToolChoiceNone;

  /** The settings of every model that does not set its own template. */
  ChatTemplateConfig common(Set<String> modelNames) {
    ChatTemplateConfig c =
        new ChatTemplateConfig(
            null,
            null,
            ChatTemplateConfig.ContentFormat.parse(contentFormat),
            defaultKwargs == null ? Map.of() : ChatTemplateConfig.parseKwargs(defaultKwargs),
            excludeToolsWhenToolChoiceNone);
    String global = null;
    for (String v : chatTemplates) {
      if (modelOf(v, modelNames) != null) continue;
      if (global != null) {
        throw new IllegalArgumentException(
            "--chat-template is given twice for all models; give NAME=... to set one model's");
      }
      global = v;
    }
    return c.withTemplate(global);
  }

  /** The settings of the models given their own template ({@code NAME=...}). */
  Map<String, ChatTemplateConfig> perModel(Set<String> modelNames) {
    ChatTemplateConfig common = common(modelNames);
    Map<String, ChatTemplateConfig> out = new LinkedHashMap<>();
    for (String v : chatTemplates) {
      String m = modelOf(v, modelNames);
      if (m == null) continue;
      if (out.containsKey(m)) {
        throw new IllegalArgumentException("--chat-template " + m + "=... is given twice");
      }
      out.put(m, common.withTemplate(v.substring(m.length() + 1)));
    }
    return out;
  }

  /** The model a {@code NAME=...} value names, or null for a value for all models. */
  private static @Nullable String modelOf(String v, Set<String> modelNames) {
    int eq = v.indexOf('=');
    if (eq < 1 || eq == v.length() - 1) return null;
    String name = v.substring(0, eq);
    return modelNames.contains(name) ? name : null;
  }
}
