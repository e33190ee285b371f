package io.kvrouter.event;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import org.junit.jupiter.api.Test;

class CacheEventTest {
  @Test
  void storedNeedsEqualLengthNonEmptyArrays() {
    assertThatThrownBy(() -> CacheEvent.storedAtRoot(new long[] {1, 2}, new long[] {1}))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("stored: 2 block hashes but 1 tokens hashes; they must be equal in length");
    assertThatThrownBy(() -> CacheEvent.stored(5, new long[0], new long[0]))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("stored: at least one block is required");
    assertThatThrownBy(() -> CacheEvent.storedAtRoot(null, new long[] {1}))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("must not be null");
    assertThatThrownBy(() -> new CacheEvent.Stored(false, 7, new long[] {1}, new long[] {1}))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("root store carries no parent");
    assertThatThrownBy(() -> CacheEvent.removed((long[]) null))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("removed: blockHashes must not be null");
  }

  @Test
  void factoriesMakeTheExpectedShapes() {
    CacheEvent.Stored s =
        (CacheEvent.Stored) CacheEvent.stored(-1L, new long[] {3}, new long[] {4});
    assertThat(s.hasParent()).isTrue();
    assertThat(s.parentHash()).isEqualTo(-1L);
    assertThat(s.length()).isEqualTo(1);
    CacheEvent.Stored root =
        (CacheEvent.Stored) CacheEvent.storedAtRoot(new long[] {3}, new long[] {4});
    assertThat(root.hasParent()).isFalse();
    assertThat(CacheEvent.cleared()).isSameAs(CacheEvent.Cleared.INSTANCE);
    assertThat(CacheEvent.removed(1, 2)).isEqualTo(CacheEvent.removed(1, 2));
  }

  @Test
  void equalityIsByContentAndPrintingIsUnsigned() {
    assertThat(CacheEvent.stored(1, new long[] {2}, new long[] {3}))
        .isEqualTo(CacheEvent.stored(1, new long[] {2}, new long[] {3}))
        .hasSameHashCodeAs(CacheEvent.stored(1, new long[] {2}, new long[] {3}))
        .isNotEqualTo(CacheEvent.storedAtRoot(new long[] {2}, new long[] {3}));
    assertThat(CacheEvent.stored(-1L, new long[] {-2L}, new long[] {3}).toString())
        .isEqualTo("Stored[parent=18446744073709551615, blocks=[18446744073709551614/3]]");
    assertThat(CacheEvent.removed(-1L).toString()).isEqualTo("Removed[18446744073709551615]");
  }

  @Test
  void workersOrderUnsignedAndRejectNegativeRanks() {
    assertThatThrownBy(() -> new Worker(1, -1))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessage("dpRank must be >= 0, got -1");
    assertThat(new Worker(-1L, 0)).isGreaterThan(new Worker(5, 3));
    assertThat(new Worker(5, 0)).isLessThan(new Worker(5, 1));
    assertThat(new Worker(-1L, 2).toString()).isEqualTo("18446744073709551615:2");
    assertThat(Worker.of(7).toString()).isEqualTo("7");
  }

  @Test
  void routerEventsNeedAWorkerAndData() {
    assertThatThrownBy(() -> new RouterEvent(null, 1, CacheEvent.cleared()))
        .isInstanceOf(NullPointerException.class)
        .hasMessage("worker");
    assertThatThrownBy(() -> new RouterEvent(Worker.of(1), 1, null))
        .isInstanceOf(NullPointerException.class)
        .hasMessage("data");
  }
}
