package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * A naive model of vLLM's hit rule for a hybrid model (docs/ingestion.md, "Hybrid models: KV cache
 * groups"): the main group as {@link ReferenceIndex}, every other group as a per-rank set of
 * (group, position hash), and the hit found by trying every cut from the longest down, checking
 * each group's rule as the engine states it. Slow and obviously right.
 */
final class HybridReference {
  final ReferenceIndex main = new ReferenceIndex();
  private final Map<Integer, KvCacheGroup> kinds = new TreeMap<>();
  private final Map<Integer, Map<Worker, Set<Long>>> held = new HashMap<>();
  private final int blockSize;

  HybridReference(int blockSize) {
    this.blockSize = blockSize;
  }

  /** A main-group event; a Cleared empties the rank's groups too (its whole cache went). */
  void applyMain(RouterEvent e) {
    main.apply(e);
    if (e.data() instanceof CacheEvent.Cleared) {
      for (Map<Worker, Set<Long>> g : held.values()) g.remove(e.worker());
    }
  }

  void applyGroup(int group, KvCacheGroup kind, RouterEvent e) {
    if (kind != null) kinds.putIfAbsent(group, kind);
    if (!kinds.containsKey(group)) return;
    Set<Long> set =
        held.computeIfAbsent(group, g -> new HashMap<>())
            .computeIfAbsent(e.worker(), w -> new HashSet<>());
    switch (e.data()) {
      case CacheEvent.Stored s -> {
        for (long h : s.blockHashes()) set.add(h);
      }
      case CacheEvent.Removed r -> {
        for (long h : r.blockHashes()) set.remove(h);
      }
      case CacheEvent.Cleared c -> set.clear();
    }
  }

  void clearWorker(long workerId) {
    main.clearWorker(workerId);
    for (Map<Worker, Set<Long>> g : held.values()) {
      g.keySet().removeIf(w -> w.workerId() == workerId);
    }
  }

  void removeWorker(long workerId) {
    main.removeWorker(workerId);
    for (Map<Worker, Set<Long>> g : held.values()) {
      g.keySet().removeIf(w -> w.workerId() == workerId);
    }
  }

  /**
   * Every rank's hit (those >= 1) for the query of local hashes {@code local}, §2 {@code seq}; a
   * model without groups (none declared yet) scores on the main group alone, uncapped, as before.
   */
  Map<Worker, Integer> hits(long[] local, long[] seq, int cap) {
    if (kinds.isEmpty()) return main.scores(local);
    Map<Worker, Integer> out = new TreeMap<>();
    for (Map.Entry<Worker, Integer> e : main.scores(local).entrySet()) {
      int h = hit(e.getKey(), e.getValue(), seq, cap);
      if (h > 0) out.put(e.getKey(), h);
    }
    return out;
  }

  private int hit(Worker w, int mainScore, long[] seq, int cap) {
    for (int c = Math.min(Math.min(mainScore, cap), seq.length); c > 0; c--) {
      boolean all = true;
      for (Map.Entry<Integer, KvCacheGroup> g : kinds.entrySet()) {
        Set<Long> set = held.getOrDefault(g.getKey(), Map.of()).getOrDefault(w, Set.of());
        if (!serves(g.getValue(), set, seq, c)) {
          all = false;
          break;
        }
      }
      if (all) return c;
    }
    return 0;
  }

  /** Whether a group holding {@code set} can serve a hit of exactly {@code c} blocks. */
  private boolean serves(KvCacheGroup g, Set<Long> set, long[] seq, int c) {
    int from =
        switch (g.kind()) {
          case FULL -> 0;
          // the window covers the last ceil((W-1)/bs) blocks, or all of them near the start
          case SLIDING_WINDOW ->
              Math.max(0, c - Math.max(1, (int) Math.ceil((g.windowTokens() - 1.0) / blockSize)));
          case STATE -> c - 1;
          case CHUNKED_LOCAL -> (c * blockSize / g.windowTokens()) * g.windowTokens() / blockSize;
        };
    for (int i = from; i < c; i++) {
      if (!set.contains(seq[i])) return false;
    }
    return true;
  }
}
