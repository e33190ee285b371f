package io.kvrouter.index;

import com.google.errorprone.annotations.concurrent.GuardedBy;
import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import java.util.Arrays;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Objects;
import java.util.SortedMap;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.Predicate;
import org.jspecify.annotations.Nullable;

/**
 * The secondary KV cache groups of a hybrid model and the engine's hit rule over them
 * (docs/routing.md, "Hybrid models"): the main group lives in an ordinary {@link KvIndex}, whose
 * score bounds the hit; this keeps, for every other group, which positions each worker rank holds,
 * and cuts each score down to the longest prefix at which every group can serve the hit, as vLLM's
 * {@code HybridKVCacheCoordinator} computes it.
 *
 * <pre>
 * Implementation notes
 *
 * Data: groups, a volatile array of Group in group-index order, copied on write when a group is
 * declared (rare: once per group and router). A Group holds its index, kind, window in blocks and
 * a ConcurrentHashMap from Worker (rank) to PositionSet: the §2 sequence hashes (DESIGN.md §2) of
 * the positions that rank holds in that group. Positions, not chains: a group event's Stored adds
 * its block hashes, Removed removes them, Cleared empties the rank's set.
 *
 * Writers: apply, clearRank, clearWorker, removeWorker. Declaration is synchronized on this; set
 * changes go through PositionSet's own monitor, so concurrent writers of one rank (an ingestion
 * thread and clearWorker) take turns there. Readers (cut, rescore) take no lock: one volatile
 * read of groups, a map lookup per group and rank, PositionSet.contains per position checked.
 *
 * Scoring (cut): the main score m (capped by the caller, e.g. below the prompt's last token) is
 * the first bound c; each group in turn lowers c to the largest cut at most c that it can serve;
 * rounds repeat until one changes nothing. Every group's answer is the largest cut it serves at or
 * below its bound, so the fixed point is the largest cut every group serves (vLLM's loop, and its
 * result). Per kind: FULL counts the leading positions held; SLIDING_WINDOW looks for the last run
 * of `need` held positions ending before c, probing a candidate window's first position first and
 * jumping a whole window when it is missing; STATE looks for the last held position before c;
 * CHUNKED_LOCAL counts held positions from the start of the chunk holding c. No allocation besides
 * rescore's result.
 *
 * Exactness: with no write in flight, rescore gives every rank exactly the engine's hit for the
 * events applied (HybridConformanceTest checks it against a naive model on random streams for
 * every index kind). While a rank's events are applied, each membership read is of a state
 * between the call's start and its end, but one answer may combine reads of different moments
 * (the main index's answer and several groups' sets): docs/concurrency.md.
 * </pre>
 */
public final class HybridIndex {

  /** One secondary group: its kind and the positions each rank holds. */
  private static final class Group {
    final int index;
    final KvCacheGroup kind;
    final int windowBlocks; // SLIDING_WINDOW: blocks a hit needs before the cut
    final ConcurrentHashMap<Worker, PositionSet> sets = new ConcurrentHashMap<>();

    Group(int index, KvCacheGroup kind, int blockSize) {
      this.index = index;
      this.kind = kind;
      this.windowBlocks =
          kind.kind() == KvCacheGroup.Kind.SLIDING_WINDOW ? kind.windowBlocks(blockSize) : 0;
    }
  }

  private static final Group[] NONE = new Group[0];

  private final int blockSize;
  private volatile Group[] groups = NONE;
  private volatile int mainGroup = -1; // the main group's index when declared, else -1
  private final LongAdder refused = new LongAdder();
  private final LongAdder missing = new LongAdder();

  /** An index of no groups for workers with blocks of {@code blockSize} tokens. */
  public HybridIndex(int blockSize) {
    if (blockSize < 1) {
      throw new IllegalArgumentException("blockSize must be >= 1, got " + blockSize);
    }
    this.blockSize = blockSize;
  }

  /** Tokens per block. */
  public int blockSize() {
    return blockSize;
  }

  /**
   * Declares the model's groups up front: every group but the main one (whose events go to the main
   * index) is kept here. Groups already declared must agree.
   *
   * @throws IllegalArgumentException when a group was declared with another kind, or the main group
   *     differs from one declared before
   */
  public synchronized void declare(KvCacheGroups model) {
    Objects.requireNonNull(model, "model");
    if (mainGroup >= 0 && mainGroup != model.mainGroup()) {
      throw new IllegalArgumentException(
          "the main KV cache group is " + mainGroup + ", not " + model.mainGroup());
    }
    for (int i = 0; i < model.size(); i++) {
      if (i == model.mainGroup()) continue;
      String problem = declareLocked(i, model.get(i));
      if (problem != null) throw new IllegalArgumentException(problem);
    }
    mainGroup = model.mainGroup();
  }

  /** Whether any secondary group is declared: only then does {@link #rescore} change a score. */
  public boolean active() {
    return groups.length > 0;
  }

  /** The declared secondary groups' kinds, by group index. */
  public SortedMap<Integer, KvCacheGroup> groups() {
    TreeMap<Integer, KvCacheGroup> out = new TreeMap<>();
    for (Group g : groups) out.put(g.index, g.kind);
    return Collections.unmodifiableSortedMap(out);
  }

  /**
   * Applies one event of secondary group {@code groupIdx} (positions named by §2 sequence hashes).
   * The first event that names the group's kind declares the group; a removal or clear of a group
   * never declared changes nothing.
   *
   * @param kind the group's kind as the event names it, or null (a removal or a clear)
   * @return false when the event was refused: its group is the main one, or was declared with
   *     another kind (counted in {@link #refusedEvents()})
   */
  public boolean apply(int groupIdx, @Nullable KvCacheGroup kind, RouterEvent event) {
    Objects.requireNonNull(event, "event");
    Group g = find(groupIdx);
    if (g == null) {
      if (kind == null) return true; // nothing was ever held in it
      synchronized (this) {
        if (declareLocked(groupIdx, kind) != null) {
          refused.increment();
          return false;
        }
      }
      g = Objects.requireNonNull(find(groupIdx)); // declared just above
    } else if (kind != null && !kind.equals(g.kind)) {
      refused.increment();
      return false;
    }
    final Worker w = event.worker();
    switch (event.data()) {
      case CacheEvent.Stored s -> {
        PositionSet set = g.sets.computeIfAbsent(w, x -> new PositionSet());
        for (long h : s.blockHashes()) set.add(h);
      }
      case CacheEvent.Removed r -> {
        PositionSet set = g.sets.get(w);
        for (long h : r.blockHashes()) {
          if (set == null || !set.remove(h)) missing.increment();
        }
      }
      case CacheEvent.Cleared c -> {
        PositionSet set = g.sets.get(w);
        if (set != null) set.clear();
      }
    }
    return true;
  }

  /** Empties every group of the rank {@code worker} (its cache was cleared). */
  public void clearRank(Worker worker) {
    for (Group g : groups) {
      PositionSet set = g.sets.get(worker);
      if (set != null) set.clear();
    }
  }

  /** Empties every group of every rank of {@code workerId}. */
  public void clearWorker(long workerId) {
    for (Group g : groups) {
      for (var e : g.sets.entrySet()) {
        if (e.getKey().workerId() == workerId) e.getValue().clear();
      }
    }
  }

  /** Forgets every rank of {@code workerId} in every group. */
  public void removeWorker(long workerId) {
    for (Group g : groups) {
      g.sets.keySet().removeIf(w -> w.workerId() == workerId);
    }
  }

  /** The positions (§2 sequence hashes) {@code worker} holds in group {@code groupIdx}. */
  public long[] positions(int groupIdx, Worker worker) {
    Group g = find(groupIdx);
    PositionSet set = g == null ? null : g.sets.get(worker);
    return set == null ? new long[0] : set.toArray();
  }

  /** Group events refused: about the main group, or naming another kind than declared. */
  public long refusedEvents() {
    return refused.sum();
  }

  /** Positions a group removal named that the rank did not hold in that group. */
  public long positionsMissing() {
    return missing.sum();
  }

  /**
   * The engine's hit for {@code worker}: the largest cut {@code c <= upper} (in blocks) at which
   * every secondary group can serve a prefix hit of the query whose §2 sequence hashes are {@code
   * seq}, where {@code upper} is what the main group serves (its score, capped by the caller).
   */
  public int cut(Worker worker, long[] seq, int upper) {
    final Group[] gs = groups;
    int c = Math.min(upper, seq.length);
    if (gs.length == 0 || c <= 0) return Math.max(c, 0);
    while (true) {
      final int before = c;
      for (Group g : gs) {
        c = largestServed(g, g.sets.get(worker), seq, c);
        if (c == 0) return 0;
      }
      if (c == before) return c;
    }
  }

  /**
   * {@code main}'s scores cut by the secondary groups (see {@link #cut}), each first capped at
   * {@code cap} blocks (the engine never reuses a prompt's last token: vLLM looks for at most
   * {@code (tokens - 1) / blockSize} blocks). Ranks whose hit is 0 are left out; block counts are
   * the main index's. Returns {@code main} itself when no group is declared.
   */
  public OverlapScores rescore(OverlapScores main, long[] seq, int cap) {
    return rescore(main, seq, cap, null);
  }

  /**
   * {@link #rescore(OverlapScores, long[], int)}, except that the ranks {@code uncut} accepts keep
   * their main score, capped (a rank whose cache the router predicts: no group tells it more).
   */
  public OverlapScores rescore(
      OverlapScores main, long[] seq, int cap, @Nullable Predicate<Worker> uncut) {
    if (groups.length == 0) return main;
    final int n = main.size();
    final Worker[] workers = new Worker[n];
    final int[] scores = new int[n];
    final int[] counts = new int[n];
    int k = 0;
    for (int i = 0; i < n; i++) {
      final Worker w = main.worker(i);
      final int upper = Math.min(main.scoreAt(i), cap);
      final int c = uncut != null && uncut.test(w) ? Math.max(upper, 0) : cut(w, seq, upper);
      if (c > 0) {
        workers[k] = w;
        scores[k] = c;
        counts[k] = main.blockCountAt(i);
        k++;
      }
    }
    return new CutScores(workers, scores, counts, k);
  }

  // ---------------------------------------------------------------- per kind

  private int largestServed(Group g, @Nullable PositionSet set, long[] seq, int c) {
    return switch (g.kind.kind()) {
      case FULL -> leadingHeld(set, seq, 0, c);
      case SLIDING_WINDOW -> window(set, seq, c, g.windowBlocks);
      case STATE -> {
        if (set == null) yield 0;
        int x = c;
        while (x > 0 && !set.contains(seq[x - 1])) x--;
        yield x;
      }
      case CHUNKED_LOCAL -> {
        // the blocks before the chunk that holds the cut are outside every query's window
        long chunk = g.kind.windowTokens();
        int start = (int) ((long) c * blockSize / chunk * chunk / blockSize);
        yield start + leadingHeld(set, seq, start, c - start);
      }
    };
  }

  /** How many positions from {@code from} on, at most {@code max}, the set holds without a gap. */
  private static int leadingHeld(@Nullable PositionSet set, long[] seq, int from, int max) {
    if (set == null) return 0;
    int n = 0;
    while (n < max && set.contains(seq[from + n])) n++;
    return n;
  }

  /**
   * The largest cut at most {@code c} that a sliding window needing {@code need} blocks serves: the
   * end of the last run of {@code need} held positions before {@code c}, else (no such run) the run
   * of held positions from position 0, which the window then covers whole.
   */
  private static int window(@Nullable PositionSet set, long[] seq, int c, int need) {
    if (need == 0) return c;
    if (set == null) return 0;
    int end = c - 1; // candidate last position of a window
    while (end - need + 1 >= 0) {
      final int first = end - need + 1;
      if (!set.contains(seq[first])) {
        end = first - 1; // every window ending in [first, end] holds position first
        continue;
      }
      int j = end;
      while (j > first && set.contains(seq[j])) j--;
      if (j == first) return end + 1;
      end = j - 1; // every window ending in [j, end] holds position j
    }
    return leadingHeld(set, seq, 0, Math.min(c, need));
  }

  // ---------------------------------------------------------------- groups

  private @Nullable Group find(int groupIdx) {
    for (Group g : groups) {
      if (g.index == groupIdx) return g;
    }
    return null;
  }

  /** Declares one group; returns why it cannot be, or null. Under this object's monitor. */
  @GuardedBy("this")
  private @Nullable String declareLocked(int groupIdx, KvCacheGroup kind) {
    if (groupIdx < 0) return "a KV cache group index is >= 0, got " + groupIdx;
    if (groupIdx == mainGroup) {
      return "KV cache group " + groupIdx + " is the main group, whose events go to the main index";
    }
    Group g = find(groupIdx);
    if (g != null) {
      return g.kind.equals(kind)
          ? null
          : "KV cache group " + groupIdx + " is " + g.kind + ", not " + kind;
    }
    Group[] next = Arrays.copyOf(groups, groups.length + 1);
    next[next.length - 1] = new Group(groupIdx, kind, blockSize);
    Arrays.sort(next, (a, b) -> Integer.compare(a.index, b.index));
    groups = next;
    return null;
  }

  /** Scores after the cut: parallel arrays, built once and never changed. */
  private static final class CutScores implements OverlapScores {
    private final Worker[] workers;
    private final int[] scores;
    private final int[] counts;
    private final int size;

    CutScores(Worker[] workers, int[] scores, int[] counts, int size) {
      this.workers = workers;
      this.scores = scores;
      this.counts = counts;
      this.size = size;
    }

    @Override
    public int score(Worker worker) {
      for (int i = 0; i < size; i++) {
        if (workers[i].equals(worker)) return scores[i];
      }
      return 0;
    }

    @Override
    public Map<Worker, Integer> scores() {
      Map<Worker, Integer> m = new LinkedHashMap<>();
      for (int i = 0; i < size; i++) m.put(workers[i], scores[i]);
      return Collections.unmodifiableMap(m);
    }

    @Override
    public int blockCount(Worker worker) {
      for (int i = 0; i < size; i++) {
        if (workers[i].equals(worker)) return counts[i];
      }
      return 0;
    }

    @Override
    public int size() {
      return size;
    }

    @Override
    public Worker worker(int i) {
      Objects.checkIndex(i, size);
      return workers[i];
    }

    @Override
    public int scoreAt(int i) {
      Objects.checkIndex(i, size);
      return scores[i];
    }

    @Override
    public int blockCountAt(int i) {
      Objects.checkIndex(i, size);
      return counts[i];
    }

    @Override
    public String toString() {
      return "OverlapScores" + scores();
    }
  }
}
