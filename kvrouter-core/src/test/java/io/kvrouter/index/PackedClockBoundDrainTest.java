package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.Arrays;
import java.util.Map;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The bounded packed positional index emptied by each way blocks leave (Removed events, Cleared,
 * removeWorker): no clock entry, no parked id and no linked block may be left, whether the last
 * block leaves the pages (more than one page: every page dropped) or not (one page: ids kept); and
 * the index then works again from empty. Chains are long enough to evict and to park ids.
 */
class PackedClockBoundDrainTest {

  private static long[] chain(int worker, int n) {
    long[] l = new long[n];
    for (int i = 0; i < n; i++) l[i] = 1_000_000L * (worker + 1) + i;
    return l;
  }

  @ParameterizedTest(name = "{0} blocks a worker, bound {1}, {2}")
  @CsvSource({
    "60, 100, removed",
    "60, 100, cleared",
    "60, 100, removeWorker",
    "3000, 5000, removed",
    "3000, 5000, cleared",
    "3000, 5000, removeWorker"
  })
  void emptiedLeavesNoQueueEntryNorParkedId(int n, long max, String how) {
    PackedPositionalIndex index = new PackedPositionalIndex(2, null, 1, max);
    long eventId = 0;
    for (int w = 0; w < 3; w++) {
      long[] l = chain(w, n);
      long[] s = SequenceHasher.sequenceHashes(l);
      Worker worker = new Worker(w, 0);
      index.apply(new RouterEvent(worker, eventId++, CacheEvent.storedAtRoot(s, l)));
      // a few blocks off and on again, so queued ids get freed (parked) while others are stored
      long[] tail = Arrays.copyOfRange(s, n - 5, n);
      index.apply(new RouterEvent(worker, eventId++, CacheEvent.removed(tail)));
      index.apply(
          new RouterEvent(
              worker,
              eventId++,
              CacheEvent.stored(s[n - 6], tail, Arrays.copyOfRange(l, n - 5, n))));
    }
    assertThat(index.stats().evictedBlocks()).as("the bound was reached").isPositive();
    for (int w = 0; w < 3; w++) {
      Worker worker = new Worker(w, 0);
      switch (how) {
        case "removed" -> {
          long[] s = SequenceHasher.sequenceHashes(chain(w, n));
          index.apply(new RouterEvent(worker, eventId++, CacheEvent.removed(s)));
        }
        case "cleared" -> index.apply(new RouterEvent(worker, eventId++, CacheEvent.cleared()));
        default -> index.removeWorker(worker.workerId());
      }
    }
    assertThat(IndexProbe.linkedNodes(index)).isZero();
    assertThat(IndexProbe.clockSize(index)).as("clock entries left").isZero();
    assertThat(IndexProbe.parked(index)).as("parked ids left").isZero();
    // from empty again: a chain of 10 stored and found whole
    long[] l = chain(7, 10);
    Worker worker = new Worker(7, 0);
    index.apply(
        new RouterEvent(
            worker, eventId, CacheEvent.storedAtRoot(SequenceHasher.sequenceHashes(l), l)));
    assertThat(index.findMatches(l, false).scores()).isEqualTo(Map.of(worker, 10));
    assertThat(IndexProbe.clockSize(index)).isEqualTo(10);
  }
}
