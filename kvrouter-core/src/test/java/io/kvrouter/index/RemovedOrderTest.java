package io.kvrouter.index;

import static org.assertj.core.api.Assertions.assertThat;

import io.kvrouter.TestBudget;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.SequenceHasher;
import it.unimi.dsi.fastutil.ints.IntArrayList;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.TreeMap;
import java.util.function.Function;
import java.util.function.Supplier;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.ValueSource;

/**
 * A Removed event's blocks may be listed in any order: BlockIndex releases runs of parent and child
 * from their end, which must leave exactly the state that any other order leaves. Two indexes of a
 * kind get the same seeded stream (chains from a small alphabet so that workers share and branch,
 * sometimes under private names, re-stores that make aliases, removals that make holes, events
 * naming parts of several chains, clears), except that each Removed event lists its blocks in
 * another order for the second index: reversed, shuffled, or rotated so that no run is found. After
 * every event both must hold the same names per worker, each connected or detached with the same
 * alias counts, the same nodes and the same counters.
 */
class RemovedOrderTest {
  private static final int STEPS = TestBudget.count("kvrouter.removedorder.steps", 2_000, 20_000);
  private static final Worker[] WORKERS = {new Worker(0, 0), new Worker(1, 0), new Worker(2, 0)};

  @ParameterizedTest(name = "{0}")
  @ValueSource(
      strings = {
        "tree",
        "positional",
        "packed positional",
        "bounded tree",
        "bounded positional",
        "bounded packed positional"
      })
  void theOrderOfARemovedEventsBlocksDoesNotMatter(String kind) {
    if (kind.endsWith("packed positional")) {
      // positional(j): ids reused at once (batch 1), so a reordered removal also reuses others;
      // bounded: evictions free ids too, and the clock queue must not name a reused one
      final long max = kind.startsWith("bounded") ? 12 : Long.MAX_VALUE;
      for (long seed = 1; seed <= 8; seed++) {
        run(
            () -> new PackedPositionalIndex(kind.startsWith("bounded") ? 3 : 2, null, 1, max),
            seed,
            i -> packedState((PackedPositionalIndex) i));
      }
      return;
    }
    Supplier<BlockIndex<?>> make =
        switch (kind) {
          case "tree" -> () -> new TreeIndex(true);
          case "positional" -> () -> new PositionalIndex(2);
          case "bounded tree" -> () -> new TreeIndex(true, 12);
          default -> () -> new PositionalIndex(3, null, 12);
        };
    for (long seed = 1; seed <= 8; seed++) run(make, seed, i -> state((BlockIndex<?>) i));
  }

  private static void run(
      Supplier<? extends KvIndex> make, long seed, Function<KvIndex, String> state) {
    KvIndex listed = make.get();
    KvIndex reordered = make.get();
    Random rnd = new Random(seed);
    Map<Worker, List<long[]>> stored = new HashMap<>(); // each worker's stored chains, by names
    long eventId = 0;
    for (int step = 0; step < STEPS; step++) {
      Worker w = WORKERS[rnd.nextInt(WORKERS.length)];
      List<long[]> chains = stored.computeIfAbsent(w, k -> new ArrayList<>());
      int dice = rnd.nextInt(10);
      CacheEvent asListed;
      CacheEvent other;
      if (dice < 5 || chains.isEmpty()) {
        long[] locals = new long[1 + rnd.nextInt(6)];
        for (int i = 0; i < locals.length; i++) locals[i] = 1L + rnd.nextInt(3);
        long[] names = SequenceHasher.sequenceHashes(locals);
        if (rnd.nextInt(6) == 0) {
          // an engine that hashes differently: private names for the same blocks
          for (int i = 0; i < names.length; i++) names[i] ^= 0x5bd1e995L * (1 + rnd.nextInt(2));
        }
        chains.add(names);
        asListed = other = CacheEvent.storedAtRoot(names, locals);
      } else if (dice < 9) {
        long[] names = removal(rnd, chains);
        asListed = CacheEvent.removed(names);
        other = CacheEvent.removed(reorder(rnd, names.clone()));
      } else {
        chains.clear();
        asListed = other = CacheEvent.cleared();
      }
      listed.apply(new RouterEvent(w, eventId, asListed));
      reordered.apply(new RouterEvent(w, eventId, other));
      eventId++;
      assertThat(state.apply(reordered))
          .as("seed %d, step %d: %s against %s", seed, step, other, asListed)
          .isEqualTo(state.apply(listed));
    }
  }

  /** Part of one stored chain, from the top, sometimes followed by the rest of another. */
  private static long[] removal(Random rnd, List<long[]> chains) {
    long[] chain = chains.get(rnd.nextInt(chains.size()));
    int from = rnd.nextInt(chain.length);
    long[] names = Arrays.copyOfRange(chain, from, from + 1 + rnd.nextInt(chain.length - from));
    if (rnd.nextInt(4) == 0) {
      long[] more = chains.get(rnd.nextInt(chains.size()));
      int at = rnd.nextInt(more.length);
      long[] both = Arrays.copyOf(names, names.length + more.length - at);
      System.arraycopy(more, at, both, names.length, more.length - at);
      names = both;
    }
    return names;
  }

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
          long first = a[0];
          System.arraycopy(a, 1, a, 0, a.length - 1);
          a[a.length - 1] = first;
        }
      }
    }
    return a;
  }

  private static void swap(long[] a, int i, int j) {
    long t = a[i];
    a[i] = a[j];
    a[j] = t;
  }

  /** Everything the writer keeps, as text: per worker each named block's path and state. */
  private static <N extends IndexNode<N>> String state(BlockIndex<N> index) {
    TreeMap<String, String> out = new TreeMap<>();
    for (WorkerBlocks<N> ws : index.workers.live()) {
      List<N> blocks = new ArrayList<>();
      ws.blocks.addBlocksTo(blocks);
      TreeMap<String, String> byPath = new TreeMap<>();
      for (N n : blocks) {
        String how = n.isHolder(ws.id) ? "connected" : n.isDetached(ws.id) ? "detached" : "neither";
        int aliases = ws.aliases == null ? 0 : ws.aliases.getInt(n);
        byPath.put(path(index, n), how + "+" + aliases);
      }
      out.put(
          ws.worker.toString(),
          byPath
              + " held="
              + ws.heldBlocks
              + " detached="
              + ws.detachedCount
              + " names="
              + ws.blocks.size());
    }
    return out
        + " nodes="
        + IndexProbe.nodeCount(index)
        + " linked="
        + IndexProbe.linkedNodes(index)
        + " clock="
        + IndexProbe.clockSize(index)
        + " "
        + index.stats();
  }

  /** {@link #state} for the packed positional index: the same text from its ids. */
  private static String packedState(PackedPositionalIndex index) {
    TreeMap<String, String> out = new TreeMap<>();
    PackedBlocks blocks = index.blocks;
    for (PackedWorker ws : index.workers.live()) {
      IntArrayList named = new IntArrayList();
      ws.addBlocksTo(named);
      TreeMap<String, String> byPath = new TreeMap<>();
      for (int i = 0; i < named.size(); i++) {
        int b = named.getInt(i);
        int[] h = blocks.holders(b);
        String how =
            SortedIds.contains(h, ws.id)
                ? "connected"
                : SortedIds.contains(h, ~ws.id) ? "detached" : "neither";
        int aliases = ws.aliases == null ? 0 : ws.aliases.get(b);
        StringBuilder path = new StringBuilder();
        for (int a = b; a >= 0; a = blocks.parent(a)) path.insert(0, blocks.local(a) + "/");
        byPath.put(path.toString(), how + "+" + aliases);
      }
      out.put(
          ws.worker.toString(),
          byPath
              + " held="
              + ws.heldBlocks
              + " detached="
              + ws.detachedCount
              + " names="
              + ws.names());
    }
    return out
        + " nodes="
        + IndexProbe.entryCount(index)
        + " linked="
        + IndexProbe.linkedNodes(index)
        + " clock="
        + IndexProbe.clockSize(index)
        + " "
        + index.stats();
  }

  private static <N extends IndexNode<N>> String path(BlockIndex<N> index, N n) {
    StringBuilder sb = new StringBuilder();
    for (N a = n; a != index.root && a != null; a = a.parent) sb.insert(0, a.local + "/");
    return sb.toString();
  }
}
