package io.kvrouter.harness;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.junit.jupiter.api.Test;

/** The chat workload of {@code bench fleet --engine-kind llama-cpp}: seeded, shared prefixes. */
class ChatWorkloadTest {
  static ChatWorkload w(long seed) {
    return ChatWorkload.generate(9, 4, 3, 200, seed);
  }

  @Test
  void theSameSeedGivesTheSameRequestsAndAnotherSeedOthers() {
    assertThat(w(7).turns()).isEqualTo(w(7).turns());
    assertThat(w(7).systemPrompts()).isEqualTo(w(7).systemPrompts());
    assertThat(w(8).turns()).isNotEqualTo(w(7).turns());
  }

  @Test
  void everyConversationHasItsTurnsInOrderAndTheyInterleave() {
    List<ChatWorkload.Turn> t = w(1).turns();
    assertThat(t).hasSize(9 * 4);
    Map<Integer, Integer> next = new HashMap<>();
    for (ChatWorkload.Turn x : t) {
      int expected = next.getOrDefault(x.conversation(), 0);
      assertThat(x.turn()).isEqualTo(expected);
      next.put(x.conversation(), expected + 1);
      // system, then (user, assistant) per earlier turn, then the new user message
      assertThat(x.messages()).hasSize(2 * x.turn() + 2);
    }
    assertThat(next).hasSize(9).allSatisfy((c, n) -> assertThat(n).isEqualTo(4));
    // not one conversation after another: some turn follows a turn of another conversation
    // before the first conversation is done
    List<Integer> firstFour = new ArrayList<>();
    for (int i = 0; i < 4; i++) firstFour.add(t.get(i).conversation());
    assertThat(new HashSet<>(firstFour)).hasSizeGreaterThan(1);
  }

  @Test
  void conversationsShareTheirSystemPromptAndEachTurnExtendsTheLast() {
    ChatWorkload w = w(3);
    assertThat(w.systemPrompts()).hasSize(3).doesNotHaveDuplicates();
    for (String s : w.systemPrompts()) {
      assertThat(s.split(" ")).hasSize(200);
    }
    // each prompt differs from the others from its third word on ("System prompt N ...")
    assertThat(w.systemPrompts().get(0)).startsWith("System prompt 1 ");
    assertThat(w.systemPrompts().get(2)).startsWith("System prompt 3 ");
    Map<Integer, List<ChatWorkload.Message>> last = new HashMap<>();
    Map<Integer, Set<Integer>> usersOf = new HashMap<>();
    for (ChatWorkload.Turn x : w.turns()) {
      assertThat(x.systemPrompt()).isEqualTo(x.conversation() % 3);
      assertThat(x.messages().getFirst())
          .isEqualTo(new ChatWorkload.Message("system", w.systemPrompts().get(x.systemPrompt())));
      List<ChatWorkload.Message> before = last.get(x.conversation());
      if (before != null) {
        // the conversation so far, then a reply, then the new user message
        assertThat(x.messages().subList(0, before.size())).isEqualTo(before);
        assertThat(x.messages().get(before.size()).role()).isEqualTo("assistant");
        assertThat(x.messages().getLast().role()).isEqualTo("user");
        assertThat(x.messages().getLast().content()).isNotEqualTo(before.getLast().content());
      }
      last.put(x.conversation(), x.messages());
      usersOf.computeIfAbsent(x.systemPrompt(), k -> new HashSet<>()).add(x.conversation());
    }
    // every system prompt is shared by three conversations
    assertThat(usersOf).hasSize(3).allSatisfy((s, cs) -> assertThat(cs).hasSize(3));
  }

  @Test
  void theBodyIsAStreamedGreedyChatRequestWithUsage() throws Exception {
    ChatWorkload.Turn t = w(2).turns().get(5);
    JsonNode b = new ObjectMapper().readTree(ChatWorkload.body("m\"x", t, 12));
    assertThat(b.path("model").asText()).isEqualTo("m\"x");
    assertThat(b.path("stream").asBoolean()).isTrue();
    assertThat(b.path("stream_options").path("include_usage").asBoolean()).isTrue();
    assertThat(b.path("temperature").asInt()).isZero();
    assertThat(b.path("max_tokens").asInt()).isEqualTo(12);
    assertThat(b.path("messages")).hasSize(t.messages().size());
    for (int i = 0; i < t.messages().size(); i++) {
      assertThat(b.path("messages").path(i).path("role").asText())
          .isEqualTo(t.messages().get(i).role());
      assertThat(b.path("messages").path(i).path("content").asText())
          .isEqualTo(t.messages().get(i).content());
    }
  }

  @Test
  void badCountsAreRefusedByName() {
    assertThatThrownBy(() -> ChatWorkload.generate(0, 1, 1, 10, 0))
        .hasMessageContaining("--conversations");
    assertThatThrownBy(() -> ChatWorkload.generate(2, 0, 1, 10, 0)).hasMessageContaining("--turns");
    assertThatThrownBy(() -> ChatWorkload.generate(2, 1, 3, 10, 0))
        .hasMessageContaining("--system-prompts");
    assertThatThrownBy(() -> ChatWorkload.generate(2, 1, 1, 0, 0))
        .hasMessageContaining("--system-prompt-words");
  }
}
