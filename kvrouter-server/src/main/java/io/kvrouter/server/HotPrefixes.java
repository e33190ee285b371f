package io.kvrouter.server;

import io.kvrouter.event.Worker;
import io.kvrouter.hash.BlockHasher;
import io.kvrouter.hash.SequenceHasher;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.OverlapScores;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * The hottest shared prefixes of one index, for {@code GET /dashboard}: the prefixes that most of
 * the recently sampled prompts ({@link PromptSample}) begin with, and which engines hold them.
 *
 * <pre>
 * Implementation notes
 *
 * Data: a ring of the last WINDOW sampled prompts as their local block hashes (unsalted, the
 * index's block size, at most MAX_BLOCKS blocks each), so at most WINDOW * MAX_BLOCKS longs.
 *
 * Who writes: the dashboard's sampler thread (add), every tick, with what it drained from the
 * index's PromptSample. Who reads: GET /dashboard/data (top), on request threads. Both are
 * synchronized on this object; neither is on a request's routing path.
 *
 * top(): every prompt's prefixes at block boundaries are keyed by their sequence hash (DESIGN.md
 * §2: a prefix's identity) and counted; a prefix is reported when at least two prompts share it
 * and no longer prefix is shared by as many (the longest prefix of each group of prompts), the
 * hottest first: the most blocks over the prompts sharing it (prompts x length), then the most
 * shared. For each one the index answers findMatches on its local
 * hashes: which ranks hold how many of its blocks. Cost: O(WINDOW * MAX_BLOCKS) map operations
 * and K findMatches, per call.
 * </pre>
 */
final class HotPrefixes {
  static final int WINDOW = 128;
  static final int MAX_BLOCKS = 256;

  /** One hot prefix: its identity, length, how many sampled prompts share it, who holds it. */
  record Prefix(long sequenceHash, int blocks, int prompts, int window, List<Holder> holders) {}

  /** A rank that holds {@code blocks} leading blocks of a prefix. */
  record Holder(Worker worker, int blocks) {}

  private final BlockHasher hasher;
  private final long[][] prompts = new long[WINDOW][];
  private int next;
  private int size;

  HotPrefixes(int blockSize) {
    this.hasher = BlockHasher.of(blockSize);
  }

  /** Adds one sampled prompt (its first {@code length} tokens); the oldest leaves the window. */
  synchronized void add(int[] tokens, int length) {
    int bs = hasher.blockSize();
    int n = Math.min(length / bs, MAX_BLOCKS);
    if (n == 0) return;
    prompts[next] = hasher.localHashes(Arrays.copyOf(tokens, n * bs));
    next = (next + 1) % WINDOW;
    if (size < WINDOW) size++;
  }

  /** Prompts in the window. */
  synchronized int size() {
    return size;
  }

  /** The {@code k} hottest shared prefixes, with their holders in {@code index}. */
  synchronized List<Prefix> top(int k, KvIndex index) {
    Map<Long, int[]> counts = new HashMap<>(); // sequence hash -> {prompts, depth, prompt, child}
    long[][] seqs = new long[size][];
    for (int p = 0; p < size; p++) {
      seqs[p] = SequenceHasher.sequenceHashes(prompts[p]);
      for (int d = 0; d < seqs[p].length; d++) {
        int[] c = counts.computeIfAbsent(seqs[p][d], h -> new int[4]);
        if (c[0]++ == 0) {
          c[1] = d + 1;
          c[2] = p;
        }
      }
    }
    for (long[] s : seqs) {
      for (int d = 1; d < s.length; d++) {
        int[] parent = counts.get(s[d - 1]);
        parent[3] = Math.max(parent[3], counts.get(s[d])[0]);
      }
    }
    List<Map.Entry<Long, int[]>> shared = new ArrayList<>();
    for (Map.Entry<Long, int[]> e : counts.entrySet()) {
      int[] c = e.getValue();
      if (c[0] >= 2 && c[3] < c[0]) shared.add(e);
    }
    // hottest first: the most prompt blocks that could come from cache (prompts x length)
    shared.sort(
        Comparator.comparingLong(
                (Map.Entry<Long, int[]> e) -> -(long) e.getValue()[0] * e.getValue()[1])
            .thenComparingInt(e -> -e.getValue()[0])
            .thenComparingLong(Map.Entry::getKey));
    List<Prefix> out = new ArrayList<>(Math.min(k, shared.size()));
    for (int i = 0; i < shared.size() && out.size() < k; i++) {
      int[] c = shared.get(i).getValue();
      long[] local = Arrays.copyOf(prompts[c[2]], c[1]);
      OverlapScores s = index.findMatches(local, false);
      List<Holder> holders = new ArrayList<>();
      for (Map.Entry<Worker, Integer> h : s.scores().entrySet()) {
        holders.add(new Holder(h.getKey(), h.getValue()));
      }
      holders.sort(
          Comparator.comparingInt((Holder h) -> -h.blocks()).thenComparing(Holder::worker));
      out.add(new Prefix(shared.get(i).getKey(), c[1], c[0], size, holders));
    }
    return out;
  }
}
