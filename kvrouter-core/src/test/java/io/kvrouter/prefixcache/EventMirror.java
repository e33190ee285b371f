package io.kvrouter.prefixcache;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;

/**
 * Something that follows the events of several caches and scores queries per worker: the naive
 * {@link NaiveEventMirror} now, the real indexes of {@code io.kvrouter.index} once they exist
 * (apply = {@code KvIndex.apply} then {@code flush}; score = {@code findMatches(localHashes,
 * false).score(worker)}).
 */
interface EventMirror {
  /** Takes one event of one worker. */
  void apply(RouterEvent event);

  /**
   * The number of leading blocks of the query, given by its local hashes, that {@code worker}
   * holds.
   */
  int score(Worker worker, long[] localHashes);

  /** Number of distinct blocks {@code worker} holds. */
  int blockCount(Worker worker);
}
