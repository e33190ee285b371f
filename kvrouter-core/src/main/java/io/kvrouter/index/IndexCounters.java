package io.kvrouter.index;

import java.util.concurrent.atomic.AtomicLongArray;

/**
 * The counters behind {@link IndexStats}, written by an index's writer and read by any thread.
 *
 * <pre>
 * Implementation notes
 *
 * One AtomicLongArray slot per counter (the constants below). Every slot has one writer at a time,
 * the index's writer (under its lock, or its one thread), so an update is a plain read and a
 * release store, with no read-modify-write (the pattern of the transports' SingleWriterCounters,
 * which core cannot use). The writer reads its own counters plainly (value()); other threads
 * read with acquire loads (get()), so each counter is exact as of some write, never torn or going
 * back; a snapshot of several counters is not atomic across them.
 * </pre>
 */
final class IndexCounters {
  static final int STORED_EVENTS = 0;
  static final int REMOVED_EVENTS = 1;
  static final int CLEARED_EVENTS = 2;
  static final int PARENT_MISSING = 3;
  static final int BLOCKS_MISSING = 4;
  static final int BLOCKS_INDEXED = 5;
  static final int EVICTED_BLOCKS = 6;
  static final int WORKERS = 7;

  private final AtomicLongArray slots = new AtomicLongArray(8);

  /** Adds {@code n} to counter {@code c}. Writer only. */
  void add(int c, long n) {
    slots.setRelease(c, slots.getPlain(c) + n);
  }

  /** Adds one to counter {@code c}. Writer only. */
  void inc(int c) {
    add(c, 1);
  }

  /** The writer's own read of counter {@code c}. Writer only. */
  long value(int c) {
    return slots.getPlain(c);
  }

  /** Counter {@code c} as published; any thread. */
  long get(int c) {
    return slots.getAcquire(c);
  }

  IndexStats stats() {
    return new IndexStats(
        get(STORED_EVENTS),
        get(REMOVED_EVENTS),
        get(CLEARED_EVENTS),
        get(PARENT_MISSING),
        get(BLOCKS_MISSING),
        get(BLOCKS_INDEXED),
        (int) get(WORKERS),
        get(EVICTED_BLOCKS));
  }
}
