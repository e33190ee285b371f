package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import com.sun.management.ThreadMXBean;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.lang.management.ManagementFactory;
import org.junit.jupiter.api.Test;

/**
 * {@link HybridIndex#cut}, the per-rank part of hybrid scoring on the routing path, allocates
 * nothing (measured with the thread's allocation counter, as {@code -prof gc} would): no boxing, no
 * iterator, no array.
 */
class HybridIndexAllocationTest {
  @Test
  void cuttingAScoreAllocatesNothing() {
    HybridIndex h = new HybridIndex(16);
    h.declare(KvCacheGroups.parse("sliding:4096,full,state,chunked:8192"));
    long[] local = new long[2000];
    for (int i = 0; i < local.length; i++) local[i] = i * 31L + 7;
    long[] seq = SequenceHasher.sequenceHashes(local);
    Worker w = new Worker(3, 1);
    long[] windowBlocks = new long[900];
    System.arraycopy(seq, 700, windowBlocks, 0, windowBlocks.length);
    h.apply(0, null, new RouterEvent(w, 1, CacheEvent.storedAtRoot(windowBlocks, windowBlocks)));
    h.apply(
        2,
        null,
        new RouterEvent(
            w, 2, CacheEvent.storedAtRoot(new long[] {seq[1199], seq[1599]}, new long[] {1, 2})));
    long[] chunk = new long[1300];
    System.arraycopy(seq, 0, chunk, 0, chunk.length);
    h.apply(3, null, new RouterEvent(w, 3, CacheEvent.storedAtRoot(chunk, chunk)));
    int expected = h.cut(w, seq, 2000);
    assertThat(expected).as("the answer the loop below repeats").isEqualTo(1200);

    ThreadMXBean mx = (ThreadMXBean) ManagementFactory.getThreadMXBean();
    long sum = 0;
    for (int i = 0; i < 20_000; i++) sum += h.cut(w, seq, 2000 - (i & 7)); // warm up, JIT
    long before = mx.getCurrentThreadAllocatedBytes();
    for (int i = 0; i < 20_000; i++) sum += h.cut(w, seq, 2000 - (i & 7));
    long allocated = mx.getCurrentThreadAllocatedBytes() - before;
    assertThat(sum).isPositive();
    assertThat(allocated).as("bytes allocated by 20,000 cuts").isZero();
  }
}
