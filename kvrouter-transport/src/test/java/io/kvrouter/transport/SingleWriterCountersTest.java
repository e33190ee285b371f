package io.kvrouter.transport;

import static org.assertj.core.api.Assertions.assertThat;

import org.junit.jupiter.api.Test;

/** The shared counters: slots by ordinal, sums, and the logging rule. */
class SingleWriterCountersTest {
  private enum K {
    A,
    B,
    C
  }

  @Test
  void slotsCountIndependentlyAndReadBackByOrdinal() {
    SingleWriterCounters<K> c = new SingleWriterCounters<>(K.class);
    assertThat(c.values()).containsExactly(0, 0, 0);
    assertThat(c.inc(K.B)).isEqualTo(1);
    assertThat(c.inc(K.B)).isEqualTo(2);
    assertThat(c.add(K.C, 40)).isEqualTo(40);
    assertThat(c.add(K.C, 2)).isEqualTo(42);
    assertThat(c.get(K.A)).isZero();
    assertThat(c.get(K.B)).isEqualTo(2);
    assertThat(c.values()).containsExactly(0, 2, 42);
  }

  @Test
  void theFirstTenThenEveryThousandthAreLogged() {
    assertThat(SingleWriterCounters.shouldLog(1)).isTrue();
    assertThat(SingleWriterCounters.shouldLog(10)).isTrue();
    assertThat(SingleWriterCounters.shouldLog(11)).isFalse();
    assertThat(SingleWriterCounters.shouldLog(999)).isFalse();
    assertThat(SingleWriterCounters.shouldLog(1000)).isTrue();
    assertThat(SingleWriterCounters.shouldLog(2000)).isTrue();
    assertThat(SingleWriterCounters.shouldLog(2001)).isFalse();
  }
}
