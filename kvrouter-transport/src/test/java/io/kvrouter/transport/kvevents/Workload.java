package io.kvrouter.transport.kvevents;

import java.util.ArrayDeque;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Random;

/**
 * A seeded random workload for a {@link FakeEngine} (test support): prompts built from a few shared
 * system prompts plus random suffixes (often with a trailing partial block), requests held for a
 * few steps, explicit evictions and, rarely, a cache clear; the pool is small, so admissions evict.
 */
public final class Workload {
  private final Random rnd;
  private final int blockSize;
  private final boolean clears;
  private final List<int[]> systemPrompts = new ArrayList<>();
  private final List<int[]> issued = new ArrayList<>();
  private final ArrayDeque<Long> active = new ArrayDeque<>();
  private long nextRequest = 1;

  /**
   * @param blockSize the engine's block size (prompt lengths are drawn in its units)
   * @param clears whether the workload ever clears the whole cache
   */
  public Workload(long seed, int blockSize, boolean clears) {
    this.rnd = new Random(seed);
    this.blockSize = blockSize;
    this.clears = clears;
    for (int i = 0; i < 4; i++) {
      systemPrompts.add(tokens(blockSize * (1 + rnd.nextInt(4)) + rnd.nextInt(blockSize)));
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
    int keep = rnd.nextInt(4) == 0 ? rnd.nextInt(sys.length + 1) : sys.length;
    int[] suffix = tokens(rnd.nextInt(3 * blockSize + 1));
    int[] p = Arrays.copyOf(sys, keep + suffix.length);
    System.arraycopy(suffix, 0, p, keep, suffix.length);
    return p;
  }

  /** One engine step: admit a request or two, release old ones, sometimes evict or clear. */
  public void step(FakeEngine engine) {
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
      int[] p =
          rnd.nextInt(3) == 0 && !issued.isEmpty()
              ? issued.get(rnd.nextInt(issued.size()))
              : prompt();
      long id = nextRequest++;
      if (engine.admit(id, p).admitted()) {
        active.addLast(id);
        issued.add(p);
        if (issued.size() > 200) issued.remove(0);
      }
    }
    while (active.size() > 3 || (!active.isEmpty() && rnd.nextBoolean())) {
      engine.release(active.pollFirst());
    }
  }

  /** Prompts to compare the router's index with the engine on: recent ones and fresh ones. */
  public List<int[]> probes() {
    List<int[]> out = new ArrayList<>(issued);
    out.addAll(systemPrompts);
    for (int i = 0; i < 20; i++) out.add(prompt());
    return out;
  }
}
