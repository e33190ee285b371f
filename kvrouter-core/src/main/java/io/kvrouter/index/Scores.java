package io.kvrouter.index;

import io.kvrouter.event.Worker;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.Map;

/**
 * The array-backed {@link OverlapScores} every index returns (the tree kinds with their worker
 * table, {@link WorkerSlot}s).
 *
 * <pre>
 * Implementation notes
 *
 * Three parallel int arrays of length {@code size}: the worker's dense id in the index, its score
 * (>= 1) and its block count; the Worker itself is found through the index's id table as it was
 * when the query ran ({@code states}, WorkerTable.readerView). Ids are never reused and a slot is
 * never changed once filled, so that table names the same worker for as long as this object
 * lives. The ids and scores arrays are the walk's own scratch, handed over: a query allocates
 * these three arrays (sized by the workers holding the first block, which all score at least 1)
 * and this object, nothing else. Built once on the reader's thread and never changed afterwards,
 * so it is safe to share. {@code score(Worker)} scans linearly: results hold a handful of workers.
 * </pre>
 */
final class Scores implements OverlapScores {
  static final Scores EMPTY = new Scores(new WorkerSlot[0], new int[0], new int[0], new int[0], 0);

  private final WorkerSlot[] states;
  private final int[] ids;
  private final int[] scores;
  private final int[] blockCounts;
  private final int size;
  private final int[] frequencies;

  Scores(WorkerSlot[] states, int[] ids, int[] scores, int[] blockCounts, int size) {
    this(states, ids, scores, blockCounts, size, NO_FREQUENCIES);
  }

  private Scores(
      WorkerSlot[] states,
      int[] ids,
      int[] scores,
      int[] blockCounts,
      int size,
      int[] frequencies) {
    this.states = states;
    this.ids = ids;
    this.scores = scores;
    this.blockCounts = blockCounts;
    this.size = size;
    this.frequencies = frequencies;
  }

  private static final int[] NO_FREQUENCIES = new int[0];

  /** The same scores with recent-use frequencies along the matched path. */
  Scores withFrequencies(int[] frequencies) {
    return new Scores(states, ids, scores, blockCounts, size, frequencies);
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
      if (states[ids[i]].worker.equals(worker)) return i;
    }
    return -1;
  }

  @Override
  public Map<Worker, Integer> scores() {
    if (size == 0) return Map.of();
    Map<Worker, Integer> m = new LinkedHashMap<>();
    for (int i = 0; i < size; i++) m.put(states[ids[i]].worker, scores[i]);
    return Collections.unmodifiableMap(m);
  }

  @Override
  public int size() {
    return size;
  }

  @Override
  public Worker worker(int i) {
    checkIndex(i);
    return states[ids[i]].worker;
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
