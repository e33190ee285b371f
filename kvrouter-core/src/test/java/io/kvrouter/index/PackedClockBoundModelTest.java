package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.SplittableRandom;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;

/**
 * The bounded packed positional index ({@link PackedClockBound} on block ids, freed ids reused at
 * once: reuse batch 1) against the object-based {@link PositionalIndex} with the same bound, whose
 * {@link ClockBound} on entry objects is the reference for the CLOCK rule (an entry object is never
 * reused, so its queue cannot name the wrong block). Seeded random events (stores under known
 * parents, some with names that are not the §2 hashes, removals, clears) and queries go to both;
 * after every step the pairs each eviction dropped (in order), the answers, the counters and every
 * worker's block count must be equal. Under eviction with batch 1 ids go back into use constantly,
 * so a queue entry naming a reused id would make the packed index drop another pair than the
 * reference (as it does when PackedBlocks hands a queued id out again: then this test fails within
 * the first seeds).
 */
class PackedClockBoundModelTest {
  private static final int STEPS = 4000;
  private static final int WORKERS = 3;

  /** One name a worker gave a block: the path of local hashes and the sequence hash used. */
  private record Named(long[] path, long seq) {}

  @ParameterizedTest(name = "jump {0} max {1} seed {2}")
  @CsvSource({
    "1, 1, 1",
    "2, 5, 2",
    "3, 12, 3",
    "32, 12, 4",
    "2, 40, 5",
    "4, 40, 6",
    "1, 60, 7",
    "8, 7, 8"
  })
  void evictsWhatTheObjectIndexEvictsAndAnswersAlike(int jump, long max, long seed) {
    PositionalIndex ref = new PositionalIndex(jump, null, max);
    PackedPositionalIndex packed = new PackedPositionalIndex(jump, null, 1, max);
    List<String> refEvicted = new ArrayList<>();
    List<String> packedEvicted = new ArrayList<>();
    ref.bound.evictionListener = (w, s, p) -> refEvicted.add(w + " " + s + Arrays.toString(p));
    packed.bound.evictionListener =
        (w, s, p) -> packedEvicted.add(w + " " + s + Arrays.toString(p));
    SplittableRandom rnd = new SplittableRandom(seed);
    List<List<Named>> names = new ArrayList<>();
    for (int w = 0; w < WORKERS; w++) names.add(new ArrayList<>());
    long eventId = 0;
    long maxParked = 0;
    for (int step = 0; step < STEPS; step++) {
      int w = rnd.nextInt(WORKERS);
      Worker worker = new Worker(w, 0);
      List<Named> mine = names.get(w);
      int op = rnd.nextInt(20);
      RouterEvent event = null;
      if (op < 11) {
        // a store: at the top or under one of the worker's names (possibly evicted since)
        Named under =
            mine.isEmpty() || rnd.nextInt(3) == 0 ? null : mine.get(rnd.nextInt(mine.size()));
        int n = 1 + rnd.nextInt(4);
        long[] locals = new long[n];
        for (int i = 0; i < n; i++) locals[i] = 1L + rnd.nextInt(3);
        long[] prefix = under == null ? new long[0] : under.path();
        long[] path = Arrays.copyOf(prefix, prefix.length + n);
        System.arraycopy(locals, 0, path, prefix.length, n);
        long[] all = SequenceHasher.sequenceHashes(path);
        long[] seqs = Arrays.copyOfRange(all, prefix.length, path.length);
        // now and then a name that is not the §2 hash (an engine that does not follow §2)
        if (rnd.nextInt(8) == 0) seqs[rnd.nextInt(n)] = rnd.nextLong();
        for (int i = 0; i < n; i++) {
          mine.add(new Named(Arrays.copyOf(path, prefix.length + i + 1), seqs[i]));
        }
        CacheEvent data =
            under == null
                ? CacheEvent.storedAtRoot(seqs, locals)
                : CacheEvent.stored(under.seq(), seqs, locals);
        event = new RouterEvent(worker, eventId++, data);
      } else if (op < 17) {
        if (!mine.isEmpty()) {
          Named gone = mine.remove(rnd.nextInt(mine.size()));
          event = new RouterEvent(worker, eventId++, CacheEvent.removed(gone.seq()));
        }
      } else if (op == 17) {
        mine.clear();
        event = new RouterEvent(worker, eventId++, CacheEvent.cleared());
      } else {
        // queries mark used bits: they change what goes next
        for (int k = 0; k < 3; k++) {
          long[] q;
          if (!mine.isEmpty() && rnd.nextBoolean()) {
            long[] p = mine.get(rnd.nextInt(mine.size())).path();
            q = Arrays.copyOf(p, p.length + rnd.nextInt(3));
            for (int i = p.length; i < q.length; i++) q[i] = 1L + rnd.nextInt(3);
          } else {
            q = new long[1 + rnd.nextInt(6)];
            for (int i = 0; i < q.length; i++) q[i] = 1L + rnd.nextInt(3);
          }
          Map<Worker, Integer> want = ref.findMatches(q, false).scores();
          assertThat(packed.findMatches(q, false).scores())
              .as("step %d query %s", step, Arrays.toString(q))
              .isEqualTo(want);
        }
      }
      if (event != null) {
        ref.apply(event);
        packed.apply(event);
      }
      assertThat(packedEvicted)
          .as("evictions up to step %d (%s)", step, event)
          .isEqualTo(refEvicted);
      assertThat(packed.stats()).as("stats at step %d", step).isEqualTo(ref.stats());
      assertThat(IndexProbe.linkedNodes(packed)).isLessThanOrEqualTo(max);
      assertThat(IndexProbe.linkedNodes(packed)).isEqualTo(IndexProbe.nodeCount(ref));
      // compacted sooner than the reference (PackedClockBound.STALE_SHIFT): within a sixteenth
      long linked = IndexProbe.linkedNodes(packed);
      assertThat((long) IndexProbe.clockSize(packed))
          .isLessThanOrEqualTo(linked + linked / 16 + 64);
      for (int v = 0; v < WORKERS; v++) {
        Worker x = new Worker(v, 0);
        assertThat(packed.blockCount(x))
            .as("blockCount %s at step %d", x, step)
            .isEqualTo(ref.blockCount(x));
      }
      maxParked = Math.max(maxParked, IndexProbe.parked(packed));
    }
    assertThat(packed.stats().evictedBlocks()).as("the bound was reached").isPositive();
    // ids went back into use many times over: far fewer handed out than blocks made and freed
    assertThat((long) IndexProbe.idsHandedOut(packed))
        .isLessThan(packed.stats().evictedBlocks() + packed.stats().removedEvents());
    if (max >= 5) assertThat(maxParked).as("a queued id was freed and parked").isPositive();
  }
}
