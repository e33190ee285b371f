package io.kvrouter.index;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import java.util.List;

/**
 * A global index of which worker rank holds which cached block, fed by cache events and asked how
 * many leading blocks of a prompt each worker already holds (DESIGN.md §4).
 *
 * <p>Scores are exact: a worker's score is the number of leading query blocks it holds without a
 * gap. Implementations differ in threading; see {@code docs/concurrency.md}.
 */
public interface KvIndex extends AutoCloseable {

  /** Applies one cache event; may be asynchronous (see {@link #flush()}). */
  void apply(RouterEvent event);

  /**
   * The number of leading blocks of the query, given by local hashes, that each worker holds.
   *
   * @param earlyExit stop once a single worker remains; its score is then at least the depth at
   *     which it became the only one
   */
  OverlapScores findMatches(long[] localHashes, boolean earlyExit);

  /** Drops every block of every rank of {@code workerId}; the worker stays known. */
  void clearWorker(long workerId);

  /** Drops every block of every rank of {@code workerId} and forgets the worker. */
  void removeWorker(long workerId);

  /** Events that, replayed into an empty index of any kind, give equal {@code findMatches}. */
  List<RouterEvent> dump();

  /**
   * The ids of every worker the index knows (with or without blocks), ascending, each once; as of
   * the events applied before the call, like {@link #dump()}.
   */
  long[] workerIds();

  /**
   * The number of distinct blocks the index holds for {@code worker} (one rank) that can score:
   * those reachable from the root without a hole (a block whose parent is missing is held but left
   * out, as {@link #dump()} leaves it out); 0 for a rank it does not know. As of the events applied
   * before the call, like {@link #dump()}.
   */
  int blockCount(Worker worker);

  /** Returns once every event applied before the call is visible to {@link #findMatches}. */
  void flush();

  /** Counters of what this index has applied and holds. */
  IndexStats stats();

  /** Stops background threads, if any, after applying what was queued. */
  @Override
  void close();
}
