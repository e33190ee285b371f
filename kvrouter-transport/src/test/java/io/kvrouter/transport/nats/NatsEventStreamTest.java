package io.kvrouter.transport.nats;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

/** Stream and subject names, without a server. */
class NatsEventStreamTest {

  @Test
  void kvroutersDefaults() {
    NatsEventStream s = NatsEventStream.defaults();
    assertThat(s.stream()).isEqualTo("KVROUTER_EVENTS");
    assertThat(s.streamSubjects()).isEqualTo("kvrouter.events.>");
    assertThat(s.subject()).isEqualTo("kvrouter.events.default");
    assertThat(NatsEventStream.forModel("meta-llama/Llama-3.1-8B").subject())
        .isEqualTo("kvrouter.events.meta-llama/Llama-3.1-8B");
  }

  @Test
  void dynamosNames() {
    NatsEventStream s = NatsEventStream.dynamo("dynamo", "backend");
    assertThat(s.stream()).isEqualTo("namespace-dynamo-component-backend-kv-events");
    assertThat(s.streamSubjects()).isEqualTo("namespace-dynamo-component-backend-kv-events.*");
    assertThat(s.subject()).isEqualTo("namespace-dynamo-component-backend-kv-events.queue");
    assertThat(NatsEventStream.dynamo("My NS", "vllm_worker").stream())
        .isEqualTo("namespace-my-ns-component-vllm-worker-kv-events");
  }

  @Test
  void badNamesAreRefused() {
    assertThatThrownBy(() -> NatsEventStream.forModel("a b"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("whitespace");
    assertThatThrownBy(() -> NatsEventStream.forModel("*"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("wildcard");
    assertThatThrownBy(() -> NatsEventStream.forModel(""))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("empty token");
    assertThatThrownBy(() -> new NatsEventStream("A.B", "x.>", "x.y"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("stream");
    assertThatThrownBy(() -> new NatsEventStream("S", "x.*", "y.z"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("not captured");
    assertThatThrownBy(() -> new NatsEventStream("S", "x.>.y", "x.a.y"))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("last token");
  }

  @Test
  void subjectMatching() {
    assertThat(Subjects.matches("a.>", "a.b.c")).isTrue();
    assertThat(Subjects.matches("a.>", "a")).isFalse();
    assertThat(Subjects.matches("a.*", "a.b")).isTrue();
    assertThat(Subjects.matches("a.*", "a.b.c")).isFalse();
    assertThat(Subjects.matches("a.b", "a.b")).isTrue();
    assertThat(Subjects.matches("a.b", "a.c")).isFalse();
  }

  @Test
  void subjectOverlap() {
    assertThat(Subjects.overlap(null, "a.b")).isTrue();
    assertThat(Subjects.overlap("", "a.b")).isTrue();
    assertThat(Subjects.overlap("a.>", "a.b")).isTrue();
    assertThat(Subjects.overlap("a.*.c", "a.b.*")).isTrue();
    assertThat(Subjects.overlap("a.*", "a.b.c")).isFalse();
    assertThat(Subjects.overlap("a.b", "a.c")).isFalse();
    assertThat(Subjects.overlap("kvrouter.events.x", "kvrouter.events.y")).isFalse();
    assertThat(Subjects.overlap(">", "kvrouter.events.y")).isTrue();
  }
}
