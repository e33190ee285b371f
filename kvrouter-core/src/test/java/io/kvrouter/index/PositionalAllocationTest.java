package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;
import static org.assertj.core.api.Assumptions.assumeThat;

import com.sun.management.ThreadMXBean;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.lang.management.ManagementFactory;
import java.util.Arrays;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * {@code findMatches} allocates only its result (DESIGN.md §7): the bytes a call allocates depend
 * on how many workers score, not on how long the query is or how many windows it bisects. Measured
 * with the JDK's per-thread allocation counter; a bound on bytes, not a timing. Bounded too (a
 * bound never reached): its walk also looks up each probed block's id and sets its used bit.
 */
class PositionalAllocationTest {

  private static long allocatedBytes() {
    return ((ThreadMXBean) ManagementFactory.getThreadMXBean()).getCurrentThreadAllocatedBytes();
  }

  private static long bytesPerCall(KvIndex index, long[] query, int calls) {
    long sink = 0;
    for (int i = 0; i < 20_000; i++) sink += index.findMatches(query, false).size(); // warm up
    long before = allocatedBytes();
    for (int i = 0; i < calls; i++) sink += index.findMatches(query, false).size();
    long after = allocatedBytes();
    assertThat(sink).isPositive();
    return (after - before) / calls;
  }

  @ParameterizedTest(name = "bounded {0}")
  @ValueSource(booleans = {false, true})
  void bytesPerCallDoNotGrowWithTheQuery(boolean bounded) {
    assumeThat(ManagementFactory.getThreadMXBean()).isInstanceOf(ThreadMXBean.class);
    KvIndex index = bounded ? KvIndexes.positional(32, 1_000_000) : KvIndexes.positional(32);
    long[] chain = new long[4_000];
    for (int i = 0; i < chain.length; i++) chain[i] = 1L + i;
    long[] seqs = SequenceHasher.sequenceHashes(chain);
    // four workers that drop out inside different windows, so the long query bisects
    int[] lengths = {5, 1_000, 2_017, 4_000};
    for (int w = 0; w < lengths.length; w++) {
      long[] s = Arrays.copyOf(seqs, lengths[w]);
      long[] l = Arrays.copyOf(chain, lengths[w]);
      index.apply(new RouterEvent(new Worker(w, 0), 0, CacheEvent.storedAtRoot(s, l)));
    }
    long shortQuery = bytesPerCall(index, Arrays.copyOf(chain, 4), 20_000);
    long longQuery = bytesPerCall(index, chain, 20_000);
    // the result: ids, scores, counts, workers and the Scores object, for four workers
    assertThat(shortQuery).isLessThan(256);
    assertThat(longQuery).isLessThanOrEqualTo(shortQuery + 16);
  }
}
