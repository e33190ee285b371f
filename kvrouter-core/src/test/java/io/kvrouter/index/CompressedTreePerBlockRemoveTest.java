package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.Arrays;
import org.junit.jupiter.api.Test;

/**
 * The per-block Removed fast path (CompressedTreeIndex notes): leaf-first removals one block an
 * event only lower cuts, yet a childless run still gives back its unheld tail (trim), and scores
 * stay exact.
 */
class CompressedTreePerBlockRemoveTest {
  private static final int LENGTH = 64;

  @Test
  void perBlockLeafRemovalsTrimTheRunAndKeepScoresExact() {
    final long[] locals = new long[LENGTH];
    for (int i = 0; i < LENGTH; i++) locals[i] = 1000L + i;
    final long[] seqs = SequenceHasher.sequenceHashes(locals);
    final Worker a = new Worker(1, 0);
    final Worker b = new Worker(2, 0);
    final CompressedTreeIndex index = (CompressedTreeIndex) KvIndexes.concurrentCompressedTree();
    long id = 0;
    index.apply(new RouterEvent(a, id++, CacheEvent.storedAtRoot(seqs.clone(), locals.clone())));
    // b holds the first 8 blocks: the run is shared, a's cut is the whole run
    index.apply(
        new RouterEvent(
            b, id++, CacheEvent.storedAtRoot(Arrays.copyOf(seqs, 8), Arrays.copyOf(locals, 8))));
    for (int held = LENGTH; held > 4; held--) {
      index.apply(new RouterEvent(a, id++, CacheEvent.removed(seqs[held - 1])));
      final int now = held - 1;
      assertThat(index.blockCount(a)).as("a after removing to %d", now).isEqualTo(now);
      final OverlapScores s = index.findMatches(locals, false);
      assertThat(s.scores().get(a)).as("a's score at %d", now).isEqualTo(now);
      assertThat(s.scores().get(b)).as("b's score at %d", now).isEqualTo(8);
      // the run's arrays follow what is held: at most twice the longest cut
      assertThat(index.runBlocks)
          .as("run blocks at %d held", now)
          .isLessThanOrEqualTo(2L * Math.max(now, 8));
      assertThat(index.runBlocks).isEqualTo(index.structureBlocks());
    }
    assertThat(index.nodeCount()).as("one run").isEqualTo(1);
  }
}
