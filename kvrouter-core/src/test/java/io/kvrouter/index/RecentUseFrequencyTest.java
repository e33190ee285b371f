package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assertions.assertThatThrownBy;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.time.Duration;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;

/** Recent-use frequencies of the single-threaded tree: off by default, windowed when on. */
class RecentUseFrequencyTest {
  private static final long SECOND = 1_000_000_000L;

  private static void store(KvIndex index, long... locals) {
    index.apply(
        new RouterEvent(
            Worker.of(0),
            0,
            CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(locals), locals)));
  }

  @Test
  void offByDefault() {
    KvIndex index = KvIndexes.radixTree();
    store(index, 1, 2, 3);
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).frequencies()).isEmpty();
  }

  @Test
  void countsUsesAlongTheMatchedPathWithinTheWindow() {
    AtomicLong now = new AtomicLong(100 * SECOND);
    KvIndex index = new TreeIndex(false, 10 * SECOND, now::get);
    store(index, 1, 2, 3);
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).frequencies())
        .containsExactly(1, 1, 1);
    now.addAndGet(SECOND);
    assertThat(index.findMatches(new long[] {1, 2, 9}, false).frequencies()).containsExactly(2, 2);
    now.addAndGet(SECOND);
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).frequencies())
        .containsExactly(3, 3, 2);
    // 10 s after the first query, it leaves the window
    now.addAndGet(9 * SECOND);
    assertThat(index.findMatches(new long[] {1}, false).frequencies()).containsExactly(3);
    now.addAndGet(20 * SECOND);
    assertThat(index.findMatches(new long[] {1, 2, 3}, false).frequencies())
        .containsExactly(1, 1, 1);
    assertThat(index.findMatches(new long[] {7}, false).frequencies()).isEmpty();
  }

  @Test
  void onlyTheSingleThreadedTreeTracksThem() {
    assertThatThrownBy(() -> new TreeIndex(true, SECOND, System::nanoTime))
        .isInstanceOf(IllegalArgumentException.class);
    assertThatThrownBy(() -> KvIndexes.radixTree(Duration.ZERO))
        .isInstanceOf(IllegalArgumentException.class)
        .hasMessageContaining("window must be positive");
    assertThat(KvIndexes.radixTree(Duration.ofSeconds(5))).isNotNull();
  }
}
