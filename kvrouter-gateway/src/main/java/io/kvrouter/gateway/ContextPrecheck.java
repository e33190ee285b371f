package io.kvrouter.gateway;

import io.kvrouter.tokenize.Tokenizer;

/**
 * Refuses a prompt certainly longer than every engine's context before it is tokenized (issue 31,
 * #4): an 8 MB prompt sent to a model of 32k tokens used to be tokenized whole (tens of seconds of
 * a tokenizing thread) only for the engine to refuse it.
 *
 * <pre>
 * Implementation notes
 *
 * Stateless. The bound is the tokenizer's (Tokenizer.certainlyMoreTokensThan: more characters than
 * the context times the most characters one token can stand for, the longest string of
 * tokenizer.json's vocabulary; none for a tokenizer whose normalizer, pre-tokenizer or model could
 * make a token stand for more, docs/tokenize.md). The context is the largest the model's engines
 * reported (Engines.largestModelLen): unknown while any of them has not said, and then nothing is
 * refused here. The refusal is vLLM's answer to a prompt past max_model_len (400
 * BadRequestError), with the token count it can prove ("at least N") instead of the exact one.
 * One comparison per request; the NFC check of a tokenizer that normalizes is one pass over the
 * text, and only for a text past the bound.
 * </pre>
 */
final class ContextPrecheck {
  private ContextPrecheck() {}

  /**
   * Throws vLLM's 400 when {@code text} certainly has more tokens than {@code context} (-1: not
   * known, nothing is refused).
   */
  static void check(Tokenizer tok, String text, long context) {
    if (context <= 0 || text == null || !tok.certainlyMoreTokensThan(text, context)) return;
    long atLeast = (text.length() + tok.maxCharsPerToken() - 1L) / tok.maxCharsPerToken();
    throw OpenAiError.vllm(
        400,
        "BadRequestError",
        "This model's maximum context length is "
            + context
            + " tokens. However, your request has at least "
            + atLeast
            + " input tokens ("
            + text.length()
            + " characters, at most "
            + tok.maxCharsPerToken()
            + " per token). Please reduce the length of the input messages.");
  }
}
