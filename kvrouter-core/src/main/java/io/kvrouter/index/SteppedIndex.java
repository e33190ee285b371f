package io.kvrouter.index;

import io.kvrouter.event.RouterEvent;
import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BiConsumer;
import org.jspecify.annotations.Nullable;

/**
 * The readers' side of a {@link KvIndex} whose one writer changes it in version steps and whose
 * readers take no lock: {@link BlockIndex} (the radix-tree and positional kinds) and {@link
 * CompressedTreeIndex} share it.
 *
 * <pre>
 * Implementation notes
 *
 * version is odd while the writer runs a step: a change of several nodes that must look like one
 * to readers (making or filling a hole, clearing a worker, splitting or merging runs). A step holds
 * at most STEP_CHANGES changes (changedInStep ends one and begins the next), and the subclass
 * leaves a valid state at every step's end. findMatches walks (the subclass's walk, whose every
 * node load is an acquire load) between two acquire loads of version and keeps the walk only when
 * both saw the same even version: the reader sees the state before or after each step, never
 * inside one.
 *
 * A reader that failed OPTIMISTIC_ATTEMPTS walks counts itself in waitingReaders; a writer that
 * ends a step while that count is not 0 spins up to PAUSE_SPINS with version even, so a waiting
 * reader waits for at most the step under way and a walk, never for a whole operation.
 *
 * Writers: under writeLock when there is one (the concurrent kinds), on the caller's thread
 * otherwise (the single-threaded kinds); lock() and unlock() do nothing then. apply and applyAll
 * (a thread-pool lane's batch under one hold of the lock) take it around the subclass's
 * applyLocked. A walk on the thread
 * that holds writeLock (a test hook inside a step) walks at once: nobody else writes.
 * docs/concurrency.md has the argument.
 * </pre>
 */
abstract class SteppedIndex implements KvIndex {
  private static final VarHandle VERSION;
  private static final VarHandle WAITING;

  static {
    try {
      MethodHandles.Lookup l = MethodHandles.lookup();
      VERSION = l.findVarHandle(SteppedIndex.class, "version", long.class);
      WAITING = l.findVarHandle(SteppedIndex.class, "waitingReaders", int.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** Optimistic walks before a reader asks writers to pause between steps. */
  private static final int OPTIMISTIC_ATTEMPTS = 64;

  /** The most changes in one step of a multi-node change (class notes). */
  static final int STEP_CHANGES = 256;

  /** How long (onSpinWait calls) a writer pauses between steps for waiting readers. */
  private static final int PAUSE_SPINS = 1 << 16;

  final @Nullable ReentrantLock writeLock; // null: single-threaded

  @SuppressWarnings("unused") // through VERSION
  private long version;

  /** Readers that failed OPTIMISTIC_ATTEMPTS walks and wait for a pause between steps. */
  @SuppressWarnings("unused") // through WAITING
  private int waitingReaders;

  private int stepChanges; // writer-only: changes in the step under way

  SteppedIndex(ReentrantLock writeLock) {
    this.writeLock = writeLock;
  }

  // ------------------------------------------------------------------ reads

  @Override
  public OverlapScores findMatches(long[] localHashes, boolean earlyExit) {
    final long before = (long) VERSION.getAcquire(this);
    if ((before & 1L) == 0) {
      final OverlapScores s = walk(localHashes, earlyExit);
      // every node load in walk() is an acquire load, so this load cannot move above them
      if ((long) VERSION.getAcquire(this) == before) return s;
    }
    return findMatchesContended(localHashes, earlyExit);
  }

  /** The reader's retry after a walk that overlapped a step (class notes). */
  private OverlapScores findMatchesContended(long[] localHashes, boolean earlyExit) {
    // the writer's own thread (a test hook inside a step), or the single-threaded kind: no other
    // thread writes, so the walk sees the state as it is
    if (writeLock == null || writeLock.isHeldByCurrentThread()) {
      return walk(localHashes, earlyExit);
    }
    boolean waiting = false;
    try {
      for (int attempt = 1; ; attempt++) {
        if (attempt == OPTIMISTIC_ATTEMPTS) {
          WAITING.getAndAdd(this, 1);
          waiting = true;
        }
        Thread.onSpinWait();
        final long before = (long) VERSION.getAcquire(this);
        if ((before & 1L) == 0) {
          final OverlapScores s = walk(localHashes, earlyExit);
          if ((long) VERSION.getAcquire(this) == before) return s;
        }
      }
    } finally {
      if (waiting) WAITING.getAndAdd(this, -1);
    }
  }

  /** The scores of one lock-free walk of the query path. */
  abstract OverlapScores walk(long[] localHashes, boolean earlyExit);

  // ------------------------------------------------------------------ writes

  /** Applies one event, under the writers' lock when there is one. */
  abstract void applyLocked(RouterEvent event);

  @Override
  public final void apply(RouterEvent event) {
    lock();
    try {
      applyLocked(event);
    } finally {
      unlock();
    }
  }

  /**
   * Applies {@code events[from, to)} in order under one hold of the writers' lock (thread-pool
   * lanes: one lock hand-over per batch instead of per event). An event that throws goes to {@code
   * onFailure} and the rest are still applied.
   */
  final void applyAll(
      RouterEvent[] events, int from, int to, BiConsumer<RouterEvent, RuntimeException> onFailure) {
    lock();
    try {
      for (int i = from; i < to; i++) {
        try {
          applyLocked(events[i]);
        } catch (RuntimeException e) {
          onFailure.accept(events[i], e);
        }
      }
    } finally {
      unlock();
    }
  }

  final void lock() {
    if (writeLock != null) writeLock.lock();
  }

  final void unlock() {
    if (writeLock != null) writeLock.unlock();
  }

  /** Starts a step of several changes (version odd); always paired with endStep in a finally. */
  final void beginStep() {
    VERSION.setRelease(this, (long) VERSION.get(this) + 1);
    stepChanges = 0;
  }

  /** Ends a step (version even) and pauses while readers wait for one to end (class notes). */
  final void endStep() {
    VERSION.setRelease(this, (long) VERSION.get(this) + 1);
    if ((int) WAITING.getOpaque(this) != 0) {
      for (int i = 0; i < PAUSE_SPINS && (int) WAITING.getAcquire(this) != 0; i++) {
        Thread.onSpinWait();
      }
    }
  }

  /**
   * Advances the version by two without a step: every walk under way retries, and later walks start
   * after it (PackedPositionalIndex bumps it before ids of removed blocks go back into use).
   * Writer-only; the writes that follow it are release stores, so a reader that sees one of them
   * sees the new version.
   */
  final void bumpVersion() {
    VERSION.setRelease(this, (long) VERSION.get(this) + 2);
  }

  /**
   * After a change inside a step, where the state is valid: once the step holds STEP_CHANGES
   * changes, ends it and begins the next.
   */
  final void countStepChange() {
    if (++stepChanges >= STEP_CHANGES) {
      endStep();
      beginStep();
    }
  }
}
