package io.kvrouter.tokenize;

import java.io.IOException;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

/**
 * A chat to render and tokenize, in OpenAI's shape: {@code messages} (each a map with {@code role},
 * {@code content} as a string or a list of text parts, and optionally {@code tool_calls}, {@code
 * name}, {@code tool_call_id}), optional {@code tools}, and the options of vLLM's {@code /tokenize}
 * with vLLM's defaults: {@code add_generation_prompt=true}, {@code add_special_tokens=false},
 * {@code continue_final_message=false}. {@code templateKwargs} are extra template variables (vLLM's
 * {@code chat_template_kwargs}, e.g. {@code enable_thinking}). Values are plain JSON-like Java
 * objects (maps, lists, strings, numbers, booleans, null). {@code chatTemplate} is the request's
 * own template (vLLM's request field {@code chat_template}), null when it has none; a server
 * accepts it only when trusted ({@link #carriesTemplate}). {@code toolChoiceNone} is a chat
 * completion's {@code tool_choice: "none"} (vLLM's {@code /tokenize} has no such field).
 */
public record ChatRequest(
    List<?> messages,
    List<?> tools,
    boolean addGenerationPrompt,
    boolean continueFinalMessage,
    boolean addSpecialTokens,
    Map<String, Object> templateKwargs,
    String chatTemplate,
    boolean toolChoiceNone) {

  /** A request with {@code tool_choice} other than "none" (or none given). */
  public ChatRequest(
      List<?> messages,
      List<?> tools,
      boolean addGenerationPrompt,
      boolean continueFinalMessage,
      boolean addSpecialTokens,
      Map<String, Object> templateKwargs,
      String chatTemplate) {
    this(
        messages,
        tools,
        addGenerationPrompt,
        continueFinalMessage,
        addSpecialTokens,
        templateKwargs,
        chatTemplate,
        false);
  }

  /** A request without a template of its own. */
  public ChatRequest(
      List<?> messages,
      List<?> tools,
      boolean addGenerationPrompt,
      boolean continueFinalMessage,
      boolean addSpecialTokens,
      Map<String, Object> templateKwargs) {
    this(
        messages,
        tools,
        addGenerationPrompt,
        continueFinalMessage,
        addSpecialTokens,
        templateKwargs,
        null);
  }

  public ChatRequest {
    if (messages == null) {
      throw new TokenizerException("messages: missing (a list of {role, content} objects)");
    }
    templateKwargs = templateKwargs == null ? Map.of() : templateKwargs;
    if (continueFinalMessage && addGenerationPrompt) {
      throw new TokenizerException(
          "continue_final_message and add_generation_prompt cannot both be true");
    }
  }

  /** The messages with vLLM's defaults: generation prompt on, no special tokens added. */
  public static ChatRequest of(List<?> messages) {
    return new ChatRequest(messages, null, true, false, false, Map.of());
  }

  /** The same request with these tools. */
  public ChatRequest withTools(List<?> tools) {
    return new ChatRequest(
        messages,
        tools,
        addGenerationPrompt,
        continueFinalMessage,
        addSpecialTokens,
        templateKwargs,
        chatTemplate,
        toolChoiceNone);
  }

  /** The same request with {@code add_generation_prompt} set. */
  public ChatRequest withAddGenerationPrompt(boolean v) {
    return new ChatRequest(
        messages,
        tools,
        v,
        continueFinalMessage && !v,
        addSpecialTokens,
        templateKwargs,
        chatTemplate,
        toolChoiceNone);
  }

  /** The same request with {@code add_special_tokens} set. */
  public ChatRequest withAddSpecialTokens(boolean v) {
    return new ChatRequest(
        messages,
        tools,
        addGenerationPrompt,
        continueFinalMessage,
        v,
        templateKwargs,
        chatTemplate,
        toolChoiceNone);
  }

  /** The same request with extra template variables. */
  public ChatRequest withTemplateKwargs(Map<String, Object> kwargs) {
    return new ChatRequest(
        messages,
        tools,
        addGenerationPrompt,
        continueFinalMessage,
        addSpecialTokens,
        kwargs,
        chatTemplate,
        toolChoiceNone);
  }

  /** The same request with its own template (null: none). */
  public ChatRequest withChatTemplate(String template) {
    return new ChatRequest(
        messages,
        tools,
        addGenerationPrompt,
        continueFinalMessage,
        addSpecialTokens,
        templateKwargs,
        template,
        toolChoiceNone);
  }

  /**
   * The same request with {@code tool_choice: "none"} (true) or another choice (false); with vLLM's
   * {@code --exclude-tools-when-tool-choice-none} such a request renders without its tools ({@link
   * ChatTemplateConfig#toolsOf}).
   */
  public ChatRequest withToolChoiceNone(boolean v) {
    return new ChatRequest(
        messages,
        tools,
        addGenerationPrompt,
        continueFinalMessage,
        addSpecialTokens,
        templateKwargs,
        chatTemplate,
        v);
  }

  /**
   * Whether the request brings a template of its own: {@code chat_template}, or a non-null {@code
   * chat_template_kwargs.chat_template} (vLLM refuses both unless trusted).
   */
  public boolean carriesTemplate() {
    return chatTemplate != null || templateKwargs.get("chat_template") != null;
  }

  /**
   * Reads the JSON body of a chat request (vLLM's {@code /tokenize} chat form or a {@code
   * /v1/chat/completions} body): {@code messages}, {@code tools}, {@code add_generation_prompt},
   * {@code continue_final_message}, {@code add_special_tokens}, {@code chat_template_kwargs},
   * {@code chat_template}, and {@code tool_choice} (whether it is "none"); other fields are
   * ignored.
   */
  public static ChatRequest fromJson(String body) {
    Object v;
    try {
      v = Json.parseClient(body);
    } catch (IOException e) {
      throw new TokenizerException("request body is not valid JSON: " + e.getMessage(), e);
    }
    if (!(v instanceof Map<?, ?> m)) {
      throw new TokenizerException("request body: expected a JSON object");
    }
    Object messages = m.get("messages");
    if (!(messages instanceof List<?> l)) {
      throw new TokenizerException("messages: expected a list of {role, content} objects");
    }
    Object tools = m.get("tools");
    if (tools != null && !(tools instanceof List<?>)) {
      throw new TokenizerException("tools: expected a list");
    }
    Object kw = m.get("chat_template_kwargs");
    if (kw != null && !(kw instanceof Map<?, ?>)) {
      throw new TokenizerException("chat_template_kwargs: expected an object");
    }
    Map<String, Object> kwargs = new LinkedHashMap<>();
    if (kw instanceof Map<?, ?> km) {
      km.forEach((k, x) -> kwargs.put((String) k, x));
    }
    Object template = m.get("chat_template");
    if (template != null && !(template instanceof String)) {
      throw new TokenizerException("chat_template: expected a string");
    }
    return new ChatRequest(
        l,
        (List<?>) tools,
        bool(m, "add_generation_prompt", true),
        bool(m, "continue_final_message", false),
        bool(m, "add_special_tokens", false),
        kwargs,
        (String) template,
        "none".equals(m.get("tool_choice")));
  }

  private static boolean bool(Map<?, ?> m, String key, boolean dflt) {
    Object v = m.get(key);
    if (v == null) {
      return dflt;
    }
    if (!(v instanceof Boolean b)) {
      throw new TokenizerException(key + ": expected true or false");
    }
    return b;
  }
}
