package io.kvrouter.index;

import io.kvrouter.event.Worker;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The array-backed {@link OverlapScores} every index returns.
 *
 * <pre>
 * Implementation notes
 *
 * Three parallel arrays of length {@code size}: the worker, its score (>= 1) and its block
 * count. Built once by the index on the reader's thread and never changed afterwards, so it is
 * safe to share. {@code score(Worker)} scans linearly: results hold a handful of workers.
 * </pre>
 */
final class Scores implements OverlapScores {
  static final Scores EMPTY = new Scores(new Worker[0], new int[0], new int[0], 0);

  private final Worker[] workers;
  private final int[] scores;
  private final int[] blockCounts;
  private final int size;
  private final int[] frequencies;

  Scores(Worker[] workers, int[] scores, int[] blockCounts, int size) {
    this(workers, scores, blockCounts, size, NO_FREQUENCIES);
  }

  private Scores(Worker[] workers, int[] scores, int[] blockCounts, int size, int[] frequencies) {
    this.workers = workers;
    this.scores = scores;
    this.blockCounts = blockCounts;
    this.size = size;
    this.frequencies = frequencies;
  }

  private static final int[] NO_FREQUENCIES = new int[0];

  /** The same scores with recent-use frequencies along the matched path. */
  Scores withFrequencies(int[] frequencies) {
    return new Scores(workers, scores, blockCounts, size, frequencies);
  }

  @Override
  public int[] frequencies() {
    return frequencies.clone();
  }

  @Override
  public int score(Worker worker) {
    int i = indexOf(worker);
    return i < 0 ? 0 : scores[i];
  }

  @Override
  public int blockCount(Worker worker) {
    int i = indexOf(worker);
    return i < 0 ? 0 : blockCounts[i];
  }

  private int indexOf(Worker worker) {
    for (int i = 0; i < size; i++) {
      if (workers[i].equals(worker)) return i;
    }
    return -1;
  }

  @Override
  public Map<Worker, Integer> scores() {
    if (size == 0) return Map.of();
    Map<Worker, Integer> m = new LinkedHashMap<>();
    for (int i = 0; i < size; i++) m.put(workers[i], scores[i]);
    return Collections.unmodifiableMap(m);
  }

  @Override
  public int size() {
    return size;
  }

  @Override
  public Worker worker(int i) {
    checkIndex(i);
    return workers[i];
  }

  @Override
  public int scoreAt(int i) {
    checkIndex(i);
    return scores[i];
  }

  @Override
  public int blockCountAt(int i) {
    checkIndex(i);
    return blockCounts[i];
  }

  private void checkIndex(int i) {
    if (i < 0 || i >= size) {
      throw new IndexOutOfBoundsException("index " + i + " out of 0.." + size);
    }
  }

  @Override
  public String toString() {
    return "OverlapScores" + scores();
  }
}
