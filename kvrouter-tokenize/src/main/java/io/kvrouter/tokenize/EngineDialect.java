package io.kvrouter.tokenize;

import java.util.List;
import java.util.Map;

/**
 * The HTTP API an inference engine speaks beyond the OpenAI endpoints they share: how it tokenizes
 * ({@code /tokenize}'s shapes), renders chats, and reports its context and KV capacity. {@link
 * EngineApi#probe} tells which one an engine speaks (docs/gateway.md, "Engine dialects").
 */
public enum EngineDialect {
  /**
   * vLLM: {@code POST /tokenize} takes {@code {"model", "prompt"|"messages", ...}} and answers
   * {@code {"count", "max_model_len", "tokens"}}; {@code /v1/models} gives {@code max_model_len};
   * {@code /metrics} gives {@code vllm:cache_config_info} (block size, GPU blocks).
   */
  VLLM("vllm"),
  /**
   * SGLang: vLLM's {@code /tokenize} shapes; {@code /get_server_info} gives {@code
   * max_total_num_tokens} (KV capacity) and {@code page_size} (its cache's granule).
   */
  SGLANG("sglang"),
  /**
   * llama.cpp's {@code llama-server}: {@code POST /apply-template {"messages"}} answers {@code
   * {"prompt"}}, {@code POST /tokenize {"content"}} answers {@code {"tokens"}} (and a body without
   * {@code content} an empty list); {@code /props} gives the context of one slot and the slots; its
   * prompt cache reuses the longest common prefix token by token.
   */
  LLAMA_CPP("llama.cpp"),
  /** An engine that answered none of the probes in a known shape: only OpenAI's endpoints. */
  UNKNOWN("unknown");

  private final String wireName;

  EngineDialect(String wireName) {
    this.wireName = wireName;
  }

  /**
   * The name in logs and answers: {@code vllm}, {@code sglang}, {@code llama.cpp}, {@code unknown}.
   */
  public String wireName() {
    return wireName;
  }

  /**
   * The chat as this engine renders a chat completions request: llama.cpp continues a trailing
   * assistant message (its default, {@code --no-prefill-assistant} turns it off), as vLLM's {@code
   * continue_final_message} would, where vLLM closes it and adds the generation prompt. Other
   * dialects render the request as it is.
   */
  public ChatRequest asRendered(ChatRequest chat) {
    if (this != LLAMA_CPP || chat.continueFinalMessage() || !endsWithAssistant(chat)) return chat;
    return new ChatRequest(
        chat.messages(), chat.tools(), false, true, chat.addSpecialTokens(), chat.templateKwargs());
  }

  private static boolean endsWithAssistant(ChatRequest chat) {
    List<?> m = chat.messages();
    return !m.isEmpty()
        && m.get(m.size() - 1) instanceof Map<?, ?> last
        && "assistant".equals(last.get("role"));
  }
}
