package io.kvrouter.harness;

import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Random;

/**
 * The multi-turn chat workload of {@code bench fleet --engine-kind llama-cpp}: {@code
 * conversations} conversations of {@code turns} turns each, every one opening with one of {@code
 * systemPrompts} shared system prompts; turn k's request is the system prompt, the conversation's
 * first k−1 user messages with a reply after each, and its k-th user message.
 *
 * <pre>
 * Implementation notes
 *
 * Immutable once built, a pure function of its arguments and the seed (java.util.Random, whose
 * sequence the JDK specifies): the same arguments give the same requests in the same order.
 * Texts are words drawn from WORDS. System prompt s opens with its own header ("System prompt
 * s+1 ...") so that no two share more than the chat template's first tokens; it is
 * systemPromptWords words long. Conversation c uses system prompt c mod systemPrompts (every
 * prompt equally used); its user messages are 20-40 words, its replies 10-20 words, fixed in
 * advance (the workload does not depend on what an engine answers).
 *
 * Order: every conversation's id appears turns times in a list that is shuffled with the seed;
 * the i-th request is the next turn of the conversation at position i. So conversations
 * interleave at random (a round-robin over the engines does not line up with the system prompts
 * by construction), and a conversation's turns come in order. The load (ChatLoad) sends a turn
 * only after the conversation's previous turn was answered.
 * </pre>
 */
final class ChatWorkload {
  /** One chat message. */
  record Message(String role, String content) {}

  /**
   * One request: conversation {@code conversation}'s turn {@code turn} (both from 0), on system
   * prompt {@code systemPrompt}, with its whole message list.
   */
  record Turn(int conversation, int turn, int systemPrompt, List<Message> messages) {}

  private static final String[] WORDS = {
    "router",
    "engine",
    "cache",
    "prefix",
    "token",
    "request",
    "answer",
    "model",
    "memory",
    "latency",
    "policy",
    "server",
    "client",
    "stream",
    "block",
    "context",
    "prompt",
    "system",
    "user",
    "reply",
    "careful",
    "clear",
    "short",
    "precise",
    "always",
    "never",
    "explain",
    "check",
    "report",
    "measure",
    "number",
    "value",
    "table",
    "list",
    "order",
    "first",
    "second",
    "third",
    "rule",
    "guide",
    "example",
    "question",
    "detail",
    "summary",
    "source",
    "evidence",
    "claim",
    "water",
    "river",
    "mountain",
    "forest",
    "city",
    "garden",
    "winter",
    "summer",
    "morning",
    "evening",
    "history",
    "science",
    "music",
    "language",
    "travel",
    "kitchen",
    "recipe",
    "valley",
    "planet",
    "ocean",
    "bridge",
    "library",
    "market",
    "letter",
    "window",
    "station",
    "journey",
    "the",
    "a",
    "of",
    "and",
    "to",
    "in",
    "with",
    "for",
    "on",
    "at",
    "by",
    "from",
    "about",
    "when",
    "which",
    "that",
    "this",
    "every",
    "each",
    "some",
    "more",
    "less",
    "than",
    "then",
    "so",
    "but"
  };

  private final List<String> systemPrompts;
  private final List<Turn> turns;

  private ChatWorkload(List<String> systemPrompts, List<Turn> turns) {
    this.systemPrompts = systemPrompts;
    this.turns = turns;
  }

  /**
   * Builds the workload.
   *
   * @throws IllegalArgumentException when a count is out of range
   */
  static ChatWorkload generate(
      int conversations, int turns, int systemPrompts, int systemPromptWords, long seed) {
    if (conversations < 1) throw new IllegalArgumentException("--conversations must be >= 1");
    if (turns < 1) throw new IllegalArgumentException("--turns must be >= 1");
    if (systemPrompts < 1 || systemPrompts > conversations) {
      throw new IllegalArgumentException(
          "--system-prompts must be between 1 and --conversations (" + conversations + ")");
    }
    if (systemPromptWords < 1) {
      throw new IllegalArgumentException("--system-prompt-words must be >= 1");
    }
    Random rnd = new Random(seed);
    List<String> sys = new ArrayList<>();
    for (int s = 0; s < systemPrompts; s++) {
      sys.add(
          "System prompt "
              + (s + 1)
              + " of this assistant. "
              + words(rnd, Math.max(0, systemPromptWords - 6)));
    }
    String[][] users = new String[conversations][turns];
    String[][] replies = new String[conversations][turns];
    for (int c = 0; c < conversations; c++) {
      for (int t = 0; t < turns; t++) {
        users[c][t] = words(rnd, 20 + rnd.nextInt(21)) + "?";
        replies[c][t] = words(rnd, 10 + rnd.nextInt(11)) + ".";
      }
    }
    List<Integer> order = new ArrayList<>();
    for (int c = 0; c < conversations; c++) for (int t = 0; t < turns; t++) order.add(c);
    Collections.shuffle(order, rnd);
    int[] next = new int[conversations];
    List<Turn> out = new ArrayList<>(order.size());
    for (int c : order) {
      int t = next[c]++;
      int s = c % systemPrompts;
      List<Message> m = new ArrayList<>(2 * t + 2);
      m.add(new Message("system", sys.get(s)));
      for (int k = 0; k < t; k++) {
        m.add(new Message("user", users[c][k]));
        m.add(new Message("assistant", replies[c][k]));
      }
      m.add(new Message("user", users[c][t]));
      out.add(new Turn(c, t, s, List.copyOf(m)));
    }
    return new ChatWorkload(List.copyOf(sys), List.copyOf(out));
  }

  private static String words(Random rnd, int n) {
    StringBuilder b = new StringBuilder(n * 8);
    for (int i = 0; i < n; i++) {
      if (i > 0) b.append(i % 12 == 0 ? ". " : " ");
      b.append(WORDS[rnd.nextInt(WORDS.length)]);
    }
    return b.toString();
  }

  /** The shared system prompts. */
  List<String> systemPrompts() {
    return systemPrompts;
  }

  /** The requests in the order they are sent. */
  List<Turn> turns() {
    return turns;
  }

  /** The request body of {@code t}: streamed with usage, greedy, at most {@code maxTokens}. */
  static String body(String model, Turn t, int maxTokens) {
    StringBuilder b = new StringBuilder(256);
    b.append("{\"model\":").append(quote(model)).append(",\"messages\":[");
    for (int i = 0; i < t.messages().size(); i++) {
      Message m = t.messages().get(i);
      if (i > 0) b.append(',');
      b.append("{\"role\":")
          .append(quote(m.role()))
          .append(",\"content\":")
          .append(quote(m.content()))
          .append('}');
    }
    return b.append("],\"stream\":true,\"stream_options\":{\"include_usage\":true},")
        .append("\"temperature\":0,\"max_tokens\":")
        .append(maxTokens)
        .append('}')
        .toString();
  }

  /** {@code s} as a JSON string (the workload's texts hold no control characters). */
  private static String quote(String s) {
    return "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n") + "\"";
  }
}
