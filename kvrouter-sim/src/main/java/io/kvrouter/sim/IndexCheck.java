package io.kvrouter.sim;

import io.kvrouter.event.CacheEvent;
import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.index.IndexStats;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.OverlapScores;
import io.kvrouter.mockengine.HybridKvCache;
import io.kvrouter.prefixcache.PrefixCache;
import io.kvrouter.route.KvRouter;
import io.kvrouter.route.RouteOptions;
import io.kvrouter.sim.trace.TraceRequest;
import io.kvrouter.sim.trace.TraceTokens;
import it.unimi.dsi.fastutil.longs.LongOpenHashSet;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * Checks that a router index equals the engines' caches, exactly (DESIGN.md §4): the same blocks
 * per rank, and the same score for every checked prompt on every rank.
 *
 * <pre>
 * Implementation notes
 *
 * Three checks, after index.flush():
 *  1. Content. index.dump() lists every block a rank holds connected to the root as one Stored
 *     event; the set of their block hashes per rank must equal PrefixCache.blockHashes() of that
 *     rank, and no other rank may hold blocks. A dump leaves out blocks detached behind a hole,
 *     so the index's own count of (rank, block) pairs must also equal the caches' total.
 *  2. Publisher discipline: the index counted no Stored with an unknown parent and no Removed of
 *     an unknown block (a correct engine never causes either).
 *  3. Scores: for up to maxPrompts trace prompts (evenly spread, the last one included),
 *     findMatches(localHashes, exact) gives every rank the number of leading blocks its cache's
 *     lookup() reports. This is the property routing relies on; 1 and 2 make sure it holds for
 *     any prompt, not only the checked ones.
 * Only the first ten problems are kept.
 *
 * A bounded index (maxBlocks > 0, --max-blocks) drops blocks the caches still hold, so it is
 * checked for what it may still promise instead: per rank its blocks are a subset of the cache's,
 * its pairs are at most the caches' total and at most maxBlocks, every checked score is at most
 * the cache's (never an over-count), and unknown parents and removals are allowed (they follow
 * from blocks it dropped).
 * </pre>
 */
public final class IndexCheck {
  private static final int MAX_PROBLEMS = 10;

  private IndexCheck() {}

  public static Verification verify(
      KvIndex index, List<PrefixCache> caches, List<TraceRequest> trace, int maxPrompts) {
    return verify(index, caches, trace, maxPrompts, 0);
  }

  /** {@link #verify}; with {@code maxBlocks > 0}, the checks of a bounded index (class notes). */
  public static Verification verify(
      KvIndex index,
      List<PrefixCache> caches,
      List<TraceRequest> trace,
      int maxPrompts,
      long maxBlocks) {
    final boolean bounded = maxBlocks > 0;
    index.flush();
    List<String> problems = new ArrayList<>();
    Map<Worker, LongOpenHashSet> indexed = new HashMap<>();
    for (RouterEvent e : index.dump()) {
      if (e.data() instanceof CacheEvent.Stored s) {
        LongOpenHashSet set = indexed.computeIfAbsent(e.worker(), w -> new LongOpenHashSet());
        for (long h : s.blockHashes()) set.add(h);
      }
    }
    long total = 0;
    for (PrefixCache c : caches) {
      long[] held = c.blockHashes();
      total += held.length;
      LongOpenHashSet inIndex = indexed.remove(c.worker());
      if (inIndex == null) inIndex = new LongOpenHashSet();
      int missing = 0;
      for (long h : held) {
        if (!inIndex.remove(h)) missing++;
      }
      if ((missing > 0 && !bounded) || !inIndex.isEmpty()) {
        add(
            problems,
            "rank "
                + name(c.worker())
                + ": the cache holds "
                + held.length
                + " blocks; the index lacks "
                + missing
                + " of them and holds "
                + inIndex.size()
                + " others");
      }
    }
    indexed.forEach(
        (w, set) -> {
          if (!set.isEmpty()) {
            add(problems, "rank " + name(w) + " has no cache but holds " + set.size() + " blocks");
          }
        });
    IndexStats stats = index.stats();
    if (bounded
        ? stats.blocksIndexed() > Math.min(total, maxBlocks)
        : stats.blocksIndexed() != total) {
      add(
          problems,
          "the index holds "
              + stats.blocksIndexed()
              + " (rank, block) pairs, the caches "
              + total
              + (bounded ? ", the bound " + maxBlocks : ""));
    }
    if (!bounded && (stats.parentMissing() != 0 || stats.blocksMissing() != 0)) {
      add(
          problems,
          "the index rejected "
              + stats.parentMissing()
              + " stores with an unknown parent and skipped "
              + stats.blocksMissing()
              + " removals of unknown blocks");
    }

    int prompts = 0;
    if (!caches.isEmpty() && maxPrompts > 0) {
      BlockHasher hasher = caches.get(0).hasher();
      int n = trace.size();
      int count = Math.min(maxPrompts, n);
      for (int k = 0; k < count; k++) {
        // evenly spread, ending with the last request (the most recent caches)
        int i = (int) ((long) (k + 1) * n / count) - 1;
        int[] tokens = TraceTokens.tokens(trace.get(i));
        OverlapScores scores = index.findMatches(hasher.localHashes(tokens), false);
        for (PrefixCache c : caches) {
          int expected = c.lookup(tokens);
          int got = scores.score(c.worker());
          if (bounded ? got > expected : got != expected) {
            add(
                problems,
                "prompt of trace line "
                    + trace.get(i).line()
                    + ": rank "
                    + name(c.worker())
                    + " caches "
                    + expected
                    + " leading blocks, the index says "
                    + got);
          }
        }
        prompts++;
      }
    }
    return new Verification(problems.isEmpty(), caches.size(), total, prompts, problems);
  }

  /**
   * The check of a hybrid model's fleet (docs/SIMULATION.md, "Hybrid models"): the main index holds
   * exactly each rank's main-group blocks and scores each checked prompt as that group's cached
   * prefix; with {@code router} (the kv policy, which reads every group), each secondary group's
   * positions per rank equal the cache's, and the router's score of each checked prompt on each
   * rank is the engine's hit ({@link HybridKvCache#lookup}).
   */
  public static Verification verifyHybrid(
      KvIndex index,
      KvRouter router,
      List<HybridKvCache> caches,
      List<TraceRequest> trace,
      int maxPrompts) {
    index.flush();
    List<String> problems = new ArrayList<>();
    Map<Worker, LongOpenHashSet> indexed = new HashMap<>();
    for (RouterEvent e : index.dump()) {
      if (e.data() instanceof CacheEvent.Stored s) {
        LongOpenHashSet set = indexed.computeIfAbsent(e.worker(), w -> new LongOpenHashSet());
        for (long h : s.blockHashes()) set.add(h);
      }
    }
    long total = 0;
    for (HybridKvCache c : caches) {
      int main = c.groups().mainGroup();
      long[] held = c.cachedHashes(main);
      total += held.length;
      LongOpenHashSet inIndex = indexed.remove(c.worker());
      compare(problems, "main group", c.worker(), held, inIndex);
      if (router == null) continue;
      for (int g = 0; g < c.groups().size(); g++) {
        if (g == main) continue;
        long[] positions = router.kvCacheGroups().positions(g, c.worker());
        long[] cached = c.cachedHashes(g);
        total += cached.length;
        LongOpenHashSet got = new LongOpenHashSet(positions);
        compare(problems, "group " + g, c.worker(), cached, got);
      }
    }
    indexed.forEach(
        (w, set) -> {
          if (!set.isEmpty()) {
            add(problems, "rank " + name(w) + " has no cache but holds " + set.size() + " blocks");
          }
        });
    IndexStats stats = index.stats();
    if (stats.parentMissing() != 0 || stats.blocksMissing() != 0) {
      add(
          problems,
          "the index rejected "
              + stats.parentMissing()
              + " stores with an unknown parent and skipped "
              + stats.blocksMissing()
              + " removals of unknown blocks");
    }
    if (router != null && router.kvCacheGroups().refusedEvents() != 0) {
      add(
          problems,
          "the router refused " + router.kvCacheGroups().refusedEvents() + " group events");
    }
    int prompts = 0;
    if (!caches.isEmpty() && maxPrompts > 0) {
      BlockHasher hasher = caches.get(0).hasher();
      int n = trace.size();
      int count = Math.min(maxPrompts, n);
      for (int k = 0; k < count; k++) {
        int i = (int) ((long) (k + 1) * n / count) - 1;
        int[] tokens = TraceTokens.tokens(trace.get(i));
        OverlapScores mainScores = index.findMatches(hasher.localHashes(tokens), false);
        OverlapScores routed =
            router == null ? null : router.overlaps(tokens, RouteOptions.defaults());
        for (HybridKvCache c : caches) {
          int expected = c.cachedPrefix(c.groups().mainGroup(), tokens);
          int got = mainScores.score(c.worker());
          if (got != expected) {
            add(
                problems,
                "prompt of trace line "
                    + trace.get(i).line()
                    + ": rank "
                    + name(c.worker())
                    + "'s main group caches "
                    + expected
                    + " leading blocks, the index says "
                    + got);
          }
          if (routed != null) {
            int hit = c.lookup(tokens);
            int scored = routed.score(c.worker());
            if (scored != hit) {
              add(
                  problems,
                  "prompt of trace line "
                      + trace.get(i).line()
                      + ": rank "
                      + name(c.worker())
                      + " would reuse "
                      + hit
                      + " blocks, the router scores "
                      + scored);
            }
          }
        }
        prompts++;
      }
    }
    return new Verification(problems.isEmpty(), caches.size(), total, prompts, problems);
  }

  private static void compare(
      List<String> problems, String what, Worker w, long[] held, LongOpenHashSet inIndex) {
    if (inIndex == null) inIndex = new LongOpenHashSet();
    int missing = 0;
    for (long h : held) {
      if (!inIndex.remove(h)) missing++;
    }
    if (missing > 0 || !inIndex.isEmpty()) {
      add(
          problems,
          "rank "
              + name(w)
              + ", "
              + what
              + ": the cache holds "
              + held.length
              + " blocks; the index lacks "
              + missing
              + " of them and holds "
              + inIndex.size()
              + " others");
    }
  }

  private static String name(Worker w) {
    return "w" + Long.toUnsignedString(w.workerId()) + "." + w.dpRank();
  }

  private static void add(List<String> problems, String p) {
    if (problems.size() < MAX_PROBLEMS) problems.add(p);
  }
}
