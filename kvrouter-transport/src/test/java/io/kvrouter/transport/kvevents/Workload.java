package io.kvrouter.transport.kvevents;

import io.kvrouter.prefixcache.PrefixCache;
import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * A seeded random workload for mock engines (test support): prompts built from a few shared system
 * prompts plus random suffixes (often with a trailing partial block), requests held for a few
 * steps, explicit evictions and, rarely, a cache clear; pools are small, so admissions evict.
 *
 * <p>One {@link Prompts} can feed several engines (each with its own {@link Workload} for the
 * requests it holds), so that engines share prefixes as a fleet's do.
 */
public final class Workload {

  /** What a workload does to an engine: a {@link FakeEngine}, or a {@link PrefixCache} itself. */
  public interface Engine {
    PrefixCache.Admission admit(long requestId, int[] tokens);

    boolean release(long requestId);

    int evict(int blocks);

    void clear();

    static Engine of(PrefixCache cache) {
      return new Engine() {
        @Override
        public PrefixCache.Admission admit(long requestId, int[] tokens) {
          return cache.admit(requestId, tokens);
        }

        @Override
        public boolean release(long requestId) {
          return cache.release(requestId);
        }

        @Override
        public int evict(int blocks) {
          return cache.evict(blocks);
        }

        @Override
        public void clear() {
          cache.clear();
        }
      };
    }
  }

  /** The prompts of a workload: shared system prompts, random suffixes, recent prompts again. */
  public static final class Prompts {
    private final Random rnd;
    private final int blockSize;
    private final int maxSuffixBlocks;
    private final int keep;
    private final List<int[]> systemPrompts = new ArrayList<>();
    private final List<int[]> issued = new ArrayList<>();
    private long nextRequest = 1;

    /**
     * @param systemPrompts how many shared system prompts
     * @param minBlocks the shortest system prompt, in full blocks (plus a partial one)
     * @param maxBlocks the longest system prompt, in full blocks (plus a partial one)
     * @param maxSuffixBlocks the longest random suffix, in blocks
     * @param keep how many recent prompts are kept to be sent again
     */
    public Prompts(
        Random rnd,
        int blockSize,
        int systemPrompts,
        int minBlocks,
        int maxBlocks,
        int maxSuffixBlocks,
        int keep) {
      this.rnd = rnd;
      this.blockSize = blockSize;
      this.maxSuffixBlocks = maxSuffixBlocks;
      this.keep = keep;
      for (int i = 0; i < systemPrompts; i++) {
        int blocks = minBlocks + rnd.nextInt(maxBlocks - minBlocks + 1);
        this.systemPrompts.add(tokens(blockSize * blocks + rnd.nextInt(blockSize)));
      }
    }

    private int[] tokens(int n) {
      int[] t = new int[n];
      for (int i = 0; i < n; i++) t[i] = rnd.nextInt(50_000);
      return t;
    }

    /** A fresh prompt: a shared prefix (sometimes cut short) and a random suffix. */
    public int[] prompt() {
      int[] sys = systemPrompts.get(rnd.nextInt(systemPrompts.size()));
      int cut = rnd.nextInt(4) == 0 ? rnd.nextInt(sys.length + 1) : sys.length;
      int[] suffix = tokens(rnd.nextInt(maxSuffixBlocks * blockSize + 1));
      int[] p = Arrays.copyOf(sys, cut + suffix.length);
      System.arraycopy(suffix, 0, p, cut, suffix.length);
      return p;
    }

    /** The next request's prompt: a third of the time a recent one again, else a fresh one. */
    int[] next() {
      return rnd.nextInt(3) == 0 && !issued.isEmpty()
          ? issued.get(rnd.nextInt(issued.size()))
          : prompt();
    }

    void admitted(int[] p) {
      issued.add(p);
      if (issued.size() > keep) issued.remove(0);
    }

    long nextRequestId() {
      return nextRequest++;
    }

    /** Prompts to compare an index with the engines on: recent, system, halves, fresh. */
    public List<int[]> probes() {
      List<int[]> out = new ArrayList<>(issued);
      for (int[] s : systemPrompts) {
        out.add(s);
        out.add(Arrays.copyOf(s, s.length / 2));
      }
      for (int i = 0; i < 20; i++) out.add(prompt());
      return out;
    }
  }

  private final Random rnd;
  private final Prompts prompts;
  private final boolean clears;
  private final ArrayDeque<Long> active = new ArrayDeque<>();

  /**
   * A workload with prompts of its own: 4 system prompts of 1 to 4 blocks, suffixes up to 3 blocks.
   *
   * @param blockSize the engine's block size (prompt lengths are drawn in its units)
   * @param clears whether the workload ever clears the whole cache
   */
  public Workload(long seed, int blockSize, boolean clears) {
    this.rnd = new Random(seed);
    this.prompts = new Prompts(rnd, blockSize, 4, 1, 4, 3, 200);
    this.clears = clears;
  }

  /** A workload drawing from shared {@code prompts} and {@code rnd}. */
  public Workload(Random rnd, Prompts prompts, boolean clears) {
    this.rnd = rnd;
    this.prompts = prompts;
    this.clears = clears;
  }

  /** A fresh prompt, see {@link Prompts#prompt()}. */
  public int[] prompt() {
    return prompts.prompt();
  }

  /** One engine step: admit a request or two, release old ones, sometimes evict or clear. */
  public void step(Engine engine) {
    int r = rnd.nextInt(100);
    if (clears && r == 0) {
      engine.clear();
      active.clear();
      return;
    }
    if (r < 8) {
      engine.evict(1 + rnd.nextInt(3));
    }
    int admits = 1 + rnd.nextInt(2);
    for (int i = 0; i < admits; i++) {
      int[] p = prompts.next();
      long id = prompts.nextRequestId();
      if (engine.admit(id, p).admitted()) {
        active.addLast(id);
        prompts.admitted(p);
      }
    }
    while (active.size() > 3 || (!active.isEmpty() && rnd.nextBoolean())) {
      engine.release(active.pollFirst());
    }
  }

  /** Prompts to compare the router's index with the engine on, see {@link Prompts#probes()}. */
  public List<int[]> probes() {
    return prompts.probes();
  }
}
