package io.kvrouter.index;

import io.kvrouter.event.Worker;
import java.util.Map;

/**
 * The answer of {@link KvIndex#findMatches}: for each worker rank with a score of at least 1, the
 * number of leading query blocks it holds, and how many blocks it holds in all.
 */
public interface OverlapScores {

  /** The score of {@code worker}: 0 when it holds none of the query's leading blocks. */
  int score(Worker worker);

  /** Every worker with a score of at least 1, with its score. */
  Map<Worker, Integer> scores();

  /**
   * How many distinct blocks {@code worker} held when the query ran, for tie-breaks; 0 when the
   * worker has no score.
   */
  int blockCount(Worker worker);

  /** How many workers have a score of at least 1. */
  int size();

  /** The {@code i}-th worker with a score, {@code 0 <= i < size()}, in no particular order. */
  Worker worker(int i);

  /** The score of {@link #worker(int) worker(i)}. */
  int scoreAt(int i);

  /** The block count of {@link #worker(int) worker(i)}. */
  int blockCountAt(int i);

  /**
   * Recent-use frequencies along the matched path, root first: entry {@code i} counts the queries
   * within the tracking window whose match covered block {@code i}. Empty unless the index tracks
   * them ({@link KvIndexes#radixTree(java.time.Duration)}).
   */
  default int[] frequencies() {
    return new int[0];
  }

  /** The best score of any worker (0 when none). */
  default int maxScore() {
    int max = 0;
    for (int i = 0, n = size(); i < n; i++) max = Math.max(max, scoreAt(i));
    return max;
  }
}
