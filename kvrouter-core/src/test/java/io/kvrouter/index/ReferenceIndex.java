package io.kvrouter.index;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;

/**
 * The naive reference model of DESIGN.md §4: per worker rank, a map from each held sequence hash to
 * the full local-hash path of its block; scores by brute force. Slow and obviously right.
 */
final class ReferenceIndex {
  private final Map<Worker, Map<Long, List<Long>>> held = new HashMap<>();

  void apply(RouterEvent e) {
    Worker w = e.worker();
    if (e.data() instanceof CacheEvent.Stored s) {
      Store st = startStore(w, s);
      if (st != null) st.storeUpTo(s.length());
    } else if (e.data() instanceof CacheEvent.Removed r) {
      Map<Long, List<Long>> mine = held.get(w);
      if (mine == null) return;
      for (long h : r.blockHashes()) mine.remove(h);
    } else {
      held.computeIfAbsent(w, k -> new HashMap<>()).clear();
    }
  }

  /**
   * A Stored event applied block by block, so that a bounded index's evictions inside the store can
   * come between its blocks (ClockBound.storeStep); null when rejected whole (its parent is not
   * named). The parent's path is looked up once, at the start, as the index does.
   */
  Store startStore(Worker w, CacheEvent.Stored s) {
    Map<Long, List<Long>> mine = held.computeIfAbsent(w, k -> new HashMap<>());
    List<Long> path = List.of();
    if (s.hasParent()) {
      path = mine.get(s.parentHash());
      if (path == null) return null;
    }
    return new Store(mine, s, path);
  }

  /** A store under way (startStore). */
  static final class Store {
    private final Map<Long, List<Long>> mine;
    private final CacheEvent.Stored s;
    private List<Long> path; // of the last block stored, or the parent's
    private int next; // blocks stored so far

    private Store(Map<Long, List<Long>> mine, CacheEvent.Stored s, List<Long> path) {
      this.mine = mine;
      this.s = s;
      this.path = path;
    }

    /** Stores the blocks before position {@code k} not stored yet. */
    void storeUpTo(int k) {
      for (; next < Math.min(k, s.length()); next++) {
        List<Long> p = new ArrayList<>(path);
        p.add(s.tokensHashes()[next]);
        path = List.copyOf(p);
        mine.put(s.blockHashes()[next], path);
      }
    }
  }

  /**
   * A bounded index dropped {@code w}'s name {@code seq} of the block at {@code path}: forget the
   * name unless it names another block by now.
   */
  void evict(Worker w, long seq, List<Long> path) {
    Map<Long, List<Long>> mine = held.get(w);
    if (mine != null && path.equals(mine.get(seq))) mine.remove(seq);
  }

  void clearWorker(long workerId) {
    for (Map.Entry<Worker, Map<Long, List<Long>>> e : held.entrySet()) {
      if (e.getKey().workerId() == workerId) e.getValue().clear();
    }
  }

  void removeWorker(long workerId) {
    held.keySet().removeIf(w -> w.workerId() == workerId);
  }

  /** Exact scores (DESIGN.md §4 rule 1): workers with score >= 1. */
  Map<Worker, Integer> scores(long[] query) {
    Map<Worker, Integer> out = new TreeMap<>();
    for (Map.Entry<Worker, Map<Long, List<Long>>> e : held.entrySet()) {
      Set<List<Long>> paths = new HashSet<>(e.getValue().values());
      int k = 0;
      List<Long> prefix = new ArrayList<>();
      while (k < query.length) {
        prefix.add(query[k]);
        if (!paths.contains(prefix)) break;
        k++;
      }
      if (k > 0) out.put(e.getKey(), k);
    }
    return out;
  }

  /** Distinct blocks {@code w} holds. */
  int blockCount(Worker w) {
    Map<Long, List<Long>> mine = held.get(w);
    return mine == null ? 0 : new HashSet<>(mine.values()).size();
  }

  /** Every sequence hash {@code w} holds, with its path. */
  Map<Long, List<Long>> blocksOf(Worker w) {
    return held.getOrDefault(w, Map.of());
  }

  Collection<Worker> workers() {
    return held.keySet();
  }
}
