package io.kvrouter.mockengine;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.HybridIndex;
import io.kvrouter.index.KvCacheGroup;
import io.kvrouter.index.KvCacheGroups;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.KvIndexes;
import io.kvrouter.transport.kvevents.ConvertedBatch;
import io.kvrouter.transport.kvevents.EngineEvent;
import io.kvrouter.transport.kvevents.EngineEventConverter;
import io.kvrouter.transport.kvevents.GroupEvent;
import io.kvrouter.transport.kvevents.KvEventBatch;
import io.kvrouter.transport.kvevents.TieredEvent;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * The hybrid engine cache's events in vLLM's wire shape (opaque hashes, group_idx, kind, window,
 * token ids over each store's whole range, as the mock engine publishes them) through kvrouter's
 * converter into a main index and a {@link HybridIndex}: before every admission, the score they
 * give is the hit the cache then reports.
 */
class HybridEventsThroughTheConverterTest {
  private static final int BS = 4;

  @ParameterizedTest
  @ValueSource(
      strings = {"full,sliding:9", "sliding:13,full,state", "full,state", "full,sliding:5,full"})
  void everyAdmissionHitsWhatTheConvertedEventsPredict(String groupsText) {
    KvCacheGroups groups = KvCacheGroups.parse(groupsText);
    Worker w = new Worker(1, 0);
    List<EngineEvent> step = new ArrayList<>();
    int[][] admitting = new int[1][];
    HybridKvCache.Listener wire =
        new HybridKvCache.Listener() {
          @Override
          public void stored(
              int group,
              KvCacheGroup kind,
              int[] positions,
              long[] hashes,
              long[] locals,
              long[] seq,
              int fromBlock,
              int toBlock) {
            long[] h = new long[hashes.length];
            for (int i = 0; i < h.length; i++) h[i] = EngineScheduler.mix(hashes[i] ^ 99);
            step.add(
                new EngineEvent.BlockStored(
                    h,
                    fromBlock > 0,
                    fromBlock > 0 ? EngineScheduler.mix(seq[fromBlock - 1] ^ 99) : 0L,
                    Arrays.copyOfRange(admitting[0], fromBlock * BS, toBlock * BS),
                    BS,
                    null,
                    "GPU",
                    null,
                    null,
                    group,
                    EngineScheduler.vllmKind(kind),
                    kind.kind() == KvCacheGroup.Kind.SLIDING_WINDOW ? kind.windowTokens() : null,
                    null));
          }

          @Override
          public void removed(int group, long hash) {
            step.add(
                new EngineEvent.BlockRemoved(
                    new long[] {EngineScheduler.mix(hash ^ 99)}, "GPU", group, null));
          }
        };
    HybridKvCache cache = new HybridKvCache(w, BS, 48, groups, wire);
    EngineEventConverter converter = new EngineEventConverter(1, 0, BS, BlockHasher.of(BS));
    KvIndex main = KvIndexes.concurrentRadixTree();
    HybridIndex hybrid = new HybridIndex(BS);
    Random rnd = new Random(groupsText.hashCode());
    int[][] prefixes = {tokens(rnd, 3), tokens(rnd, 5), tokens(rnd, 7)};
    List<Long> running = new ArrayList<>();
    int hits = 0;
    for (int op = 0; op < 1500; op++) {
      // deliver the last step's events as one batch, as the engine publishes a step
      if (!step.isEmpty()) {
        ConvertedBatch c = converter.convert(new KvEventBatch(1.0, 0, List.copyOf(step), 0));
        step.clear();
        for (TieredEvent e : c.events()) main.apply(e.event());
        for (GroupEvent g : c.groupEvents()) hybrid.apply(g.groupIdx(), g.group(), g.event());
        assertThat(c.refusedEvents() + c.ignoredEvents()).as("op %d", op).isZero();
      }
      int dice = rnd.nextInt(10);
      if (dice < 5 || running.isEmpty()) {
        int[] base = prefixes[rnd.nextInt(prefixes.length)];
        int[] p = Arrays.copyOf(base, base.length + rnd.nextInt(3 * BS));
        for (int i = base.length; i < p.length; i++) p[i] = 50_000 + rnd.nextInt(1000);
        long[] local = BlockHasher.of(BS).localHashes(p);
        long[] seq = SequenceHasher.sequenceHashes(local);
        int predicted =
            hybrid.active()
                ? hybrid
                    .rescore(main.findMatches(local, false), seq, Math.max(0, p.length - 1) / BS)
                    .score(w)
                : Math.min(main.findMatches(local, false).score(w), Math.max(0, p.length - 1) / BS);
        admitting[0] = p;
        HybridKvCache.Admission a = cache.admit(op, p);
        assertThat(a.cachedBlocks()).as("op %d (%s)", op, groupsText).isEqualTo(predicted);
        if (a.admitted()) running.add((long) op);
        if (a.cachedBlocks() > 0) hits++;
      } else if (dice < 8) {
        cache.prefillDone(running.get(rnd.nextInt(running.size())));
      } else {
        cache.release(running.remove(rnd.nextInt(running.size())));
      }
    }
    assertThat(hits).isPositive();
  }

  private static int[] tokens(Random rnd, int blocks) {
    int[] t = new int[blocks * BS];
    for (int i = 0; i < t.length; i++) t[i] = 1 + rnd.nextInt(40_000);
    return t;
  }
}
