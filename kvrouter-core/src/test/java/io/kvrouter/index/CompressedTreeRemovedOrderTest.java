package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import java.util.TreeMap;
import java.util.TreeSet;
import org.junit.jupiter.api.Test;

/**
 * A Removed event of the compressed tree may list its blocks in any order. One Removed per eviction
 * names each evicted leaf's blocks from the top (PrefixCache's default); the tree takes such a
 * chain deepest first, so the removal lowers a cut instead of splitting the run once per block
 * (issue 35). Two checks: a chain listed from the top splits nothing, and any order of a Removed
 * event's blocks leaves what the listed order leaves (names, scores, counters).
 */
class CompressedTreeRemovedOrderTest {
  private static final Worker A = new Worker(1, 0);
  private static final Worker B = new Worker(2, 0);
  private static final Worker C = new Worker(3, 0);

  @Test
  void aChainListedFromTheTopLowersTheCutWithoutASplit() {
    final long[] locals = new long[64];
    for (int i = 0; i < locals.length; i++) locals[i] = 1000L + i;
    final long[] seqs = SequenceHasher.sequenceHashes(locals);
    final CompressedTreeIndex index = new CompressedTreeIndex(true);
    long id = 0;
    index.apply(new RouterEvent(A, id++, CacheEvent.storedAtRoot(seqs, locals)));
    // B holds the first 8 blocks: one run, A's cut 64 and B's 8
    index.apply(
        new RouterEvent(
            B, id++, CacheEvent.storedAtRoot(Arrays.copyOf(seqs, 8), Arrays.copyOf(locals, 8))));
    assertThat(index.nodeCount()).isEqualTo(1);
    final List<RunNode> settled = new ArrayList<>();
    index.settleFault = settled::add;

    // A's blocks 32..63, from the top: as listed, each but the last would split the run
    index.apply(new RouterEvent(A, id++, CacheEvent.removed(Arrays.copyOfRange(seqs, 32, 64))));

    assertThat(settled).as("nodes split, merged or dropped by the removal").isEmpty();
    assertThat(index.nodeCount()).isEqualTo(1);
    assertThat(index.blockCount(A)).isEqualTo(32);
    final OverlapScores s = index.findMatches(locals, false);
    assertThat(s.scores()).containsEntry(A, 32).containsEntry(B, 8);
    assertThat(index.stats().blocksIndexed()).isEqualTo(40);
  }

  @Test
  void theOrderOfARemovedEventsBlocksDoesNotMatter() {
    for (long seed = 1; seed <= 8; seed++) run(seed);
  }

  private static void run(long seed) {
    final Worker[] workers = {A, B, C};
    final CompressedTreeIndex listed = new CompressedTreeIndex(true);
    final CompressedTreeIndex reordered = new CompressedTreeIndex(true);
    final Random rnd = new Random(seed);
    final List<List<long[]>> chains = new ArrayList<>(); // per worker: (names, locals) pairs
    for (int w = 0; w < workers.length; w++) chains.add(new ArrayList<>());
    final List<long[]> queries = new ArrayList<>();
    long eventId = 0;
    for (int step = 0; step < 2_000; step++) {
      final int w = rnd.nextInt(workers.length);
      final List<long[]> mine = chains.get(w);
      final int dice = rnd.nextInt(10);
      final CacheEvent asListed;
      final CacheEvent other;
      if (dice < 5 || mine.isEmpty()) {
        // chains from a small alphabet, so that workers share runs and branch inside them
        final long[] locals = new long[1 + rnd.nextInt(12)];
        for (int i = 0; i < locals.length; i++) locals[i] = 1L + rnd.nextInt(3);
        final long[] names = SequenceHasher.sequenceHashes(locals);
        mine.add(names);
        queries.add(locals);
        asListed = other = CacheEvent.storedAtRoot(names, locals);
      } else if (dice < 9) {
        // part of a stored chain from the top, sometimes followed by part of another
        final long[] chain = mine.get(rnd.nextInt(mine.size()));
        final int from = rnd.nextInt(chain.length);
        long[] names = Arrays.copyOfRange(chain, from, from + 1 + rnd.nextInt(chain.length - from));
        if (rnd.nextInt(4) == 0) {
          final long[] more = mine.get(rnd.nextInt(mine.size()));
          final int at = rnd.nextInt(more.length);
          final long[] both = Arrays.copyOf(names, names.length + more.length - at);
          System.arraycopy(more, at, both, names.length, more.length - at);
          names = both;
        }
        asListed = CacheEvent.removed(names);
        other = CacheEvent.removed(reorder(rnd, names.clone()));
      } else {
        mine.clear();
        asListed = other = CacheEvent.cleared();
      }
      listed.apply(new RouterEvent(workers[w], eventId, asListed));
      reordered.apply(new RouterEvent(workers[w], eventId, other));
      eventId++;
      assertThat(state(reordered, queries))
          .as("seed %d, step %d: %s against %s", seed, step, other, asListed)
          .isEqualTo(state(listed, queries));
    }
  }

  /** Reversed, shuffled, or rotated so that a chain is not found from its top. */
  private static long[] reorder(Random rnd, long[] a) {
    switch (rnd.nextInt(3)) {
      case 0 -> {
        for (int i = 0, j = a.length - 1; i < j; i++, j--) swap(a, i, j);
      }
      case 1 -> {
        for (int i = a.length - 1; i > 0; i--) swap(a, i, rnd.nextInt(i + 1));
      }
      default -> {
        if (a.length > 1) {
          final long first = a[0];
          System.arraycopy(a, 1, a, 0, a.length - 1);
          a[a.length - 1] = first;
        }
      }
    }
    return a;
  }

  private static void swap(long[] a, int i, int j) {
    final long t = a[i];
    a[i] = a[j];
    a[j] = t;
  }

  /** What a reader and the counters see: connected blocks per worker, counts, every score. */
  private static String state(CompressedTreeIndex index, List<long[]> queries) {
    final TreeMap<String, TreeSet<Long>> connected = new TreeMap<>();
    for (RouterEvent e : index.dump()) {
      if (!(e.data() instanceof CacheEvent.Stored stored)) continue; // a dump opens with Cleared
      final TreeSet<Long> set =
          connected.computeIfAbsent(e.worker().toString(), k -> new TreeSet<>());
      for (long h : stored.blockHashes()) set.add(h);
    }
    final StringBuilder sb = new StringBuilder().append(connected).append(' ');
    for (Worker w : new Worker[] {A, B, C}) sb.append(w).append('=').append(index.blockCount(w));
    sb.append(' ').append(index.stats());
    for (long[] q : queries)
      sb.append(' ').append(new TreeMap<>(index.findMatches(q, false).scores()));
    return sb.toString();
  }
}
