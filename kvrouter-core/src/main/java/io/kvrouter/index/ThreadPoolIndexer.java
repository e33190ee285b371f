package io.kvrouter.index;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import java.util.function.BiConsumer;
import java.util.function.BooleanSupplier;
import java.util.logging.Level;
import java.util.logging.Logger;
import org.jspecify.annotations.NullUnmarked;
import org.jspecify.annotations.Nullable;

/**
 * Applies events to a concurrent index on a fixed set of threads, every event of one worker id on
 * the same thread and in arrival order; queries run on the caller's thread.
 *
 * <pre>
 * Implementation notes
 *
 * One bounded ring (LaneQueue: no lock and no allocation while it is neither empty nor full) and
 * one daemon thread per lane; lane = mix(workerId) mod lanes, so every rank of a worker shares a
 * lane and clearWorker/removeWorker queue behind that worker's events. A full ring blocks the
 * producer (back-pressure; nothing is dropped). Work items are the RouterEvents themselves (no
 * wrapper) or Runnables (worker-wide operations and flush barriers). A lane wakes once for
 * everything queued meanwhile, takes it (up to BATCH items) at once and applies each run of
 * consecutive events under one hold of the index's writer lock (SteppedIndex.applyAll, so the
 * tree, positional and compressed kinds), so two lanes hand the lock over once per batch rather
 * than
 * once per event; order is kept. flush() puts a latch behind every lane's queue and waits for all
 * of them. An exception while applying is logged and counted; the lane goes on with the next
 * item. An Error (out of memory, a failed assertion) ends the lane's thread: it is logged as
 * severe and kept, and from then on flush() and every apply or worker operation on that lane
 * throw IllegalStateException naming it, instead of waiting for a thread that is gone (a blocked
 * flush or put checks every WAIT_MILLIS). close() drains every lane, then stops the threads;
 * apply after close throws.
 * </pre>
 */
@NullUnmarked // nulls inside the structure: not yet checked by NullAway (docs/static-analysis.md)
final class ThreadPoolIndexer implements KvIndex {
  private static final Logger LOG = Logger.getLogger(ThreadPoolIndexer.class.getName());
  static final int QUEUE_CAPACITY = 1 << 16; // a lane's ring (LaneQueueTest runs it at this size)
  static final int BATCH = 1024; // most items a lane takes from its queue at once
  private static final long WAIT_MILLIS = 20; // how often a blocked flush or put checks the lanes
  private static final Object STOP = new Object();

  private final KvIndex index;
  private final @Nullable SteppedIndex
      stepped; // index itself when it can apply a batch at once; or null
  private final BiConsumer<RouterEvent, RuntimeException> onFailure = this::failed;
  private final Lane[] lanes;
  private final AtomicLong failures = new AtomicLong();
  private volatile boolean closed;

  ThreadPoolIndexer(KvIndex index, int threads) {
    this.index = index;
    this.stepped = index instanceof SteppedIndex s ? s : null;
    this.lanes = new Lane[threads];
    for (int i = 0; i < threads; i++) {
      lanes[i] = new Lane(i);
      lanes[i].thread.start();
    }
  }

  private Lane laneOf(long workerId) {
    long h = workerId * 0x9E3779B97F4A7C15L;
    return lanes[(int) Math.floorMod(h ^ (h >>> 32), (long) lanes.length)];
  }

  @Override
  public void apply(RouterEvent event) {
    laneOf(event.worker().workerId()).put(event);
  }

  @Override
  public OverlapScores findMatches(long[] localHashes, boolean earlyExit) {
    return index.findMatches(localHashes, earlyExit);
  }

  @Override
  public void clearWorker(long workerId) {
    laneOf(workerId).put((Runnable) () -> index.clearWorker(workerId));
  }

  @Override
  public void removeWorker(long workerId) {
    laneOf(workerId).put((Runnable) () -> index.removeWorker(workerId));
  }

  @Override
  public List<RouterEvent> dump() {
    flush();
    return index.dump();
  }

  @Override
  public long[] workerIds() {
    flush();
    return index.workerIds();
  }

  @Override
  public int blockCount(Worker worker) {
    flush();
    return index.blockCount(worker);
  }

  @Override
  public void flush() {
    CountDownLatch done = new CountDownLatch(lanes.length);
    for (Lane lane : lanes) lane.put((Runnable) done::countDown);
    try {
      while (!done.await(WAIT_MILLIS, TimeUnit.MILLISECONDS)) {
        for (Lane lane : lanes) lane.checkAlive();
      }
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new IllegalStateException("interrupted while flushing", e);
    }
  }

  @Override
  public IndexStats stats() {
    return index.stats();
  }

  private void failed(Object item, RuntimeException e) {
    failures.incrementAndGet();
    LOG.log(Level.WARNING, "failed to apply " + item + "; skipped", e);
  }

  /** Events whose application threw (logged, skipped). */
  long failures() {
    return failures.get();
  }

  @Override
  public void close() {
    if (closed) return;
    closed = true;
    for (Lane lane : lanes) {
      if (lane.stoppedBy == null) lane.putUnchecked(STOP);
    }
    for (Lane lane : lanes) {
      try {
        lane.thread.join();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        break;
      }
    }
    index.close();
  }

  @Override
  public String toString() {
    return "threadPool(" + index + ", " + lanes.length + ")";
  }

  private final class Lane implements Runnable {
    final LaneQueue queue = new LaneQueue(QUEUE_CAPACITY);
    final int number;
    final Thread thread;
    volatile @Nullable Throwable
        stoppedBy; // an Error that ended this lane's thread; null while it runs
    final BooleanSupplier stopped = () -> stoppedBy != null; // one object, not one per put

    Lane(int i) {
      number = i;
      thread = new Thread(this, "kvrouter-indexer-" + i);
      thread.setDaemon(true);
      queue.consumer(thread);
    }

    /** Throws when this lane's thread has stopped on an error: nothing queued to it would run. */
    void checkAlive() {
      final Throwable t = stoppedBy;
      if (t != null) {
        throw new IllegalStateException(
            "indexer lane " + number + " stopped on " + t + "; its events are not applied", t);
      }
    }

    void put(Object item) {
      if (closed) throw new IllegalStateException("the indexer is closed");
      checkAlive();
      putUnchecked(item);
    }

    /** Queues {@code item}, waiting while the queue is full unless the lane stops meanwhile. */
    void putUnchecked(Object item) {
      try {
        if (!queue.put(item, stopped) && item != STOP) checkAlive();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new IllegalStateException("interrupted while queueing an event", e);
      }
    }

    @Override
    public void run() {
      try {
        drain();
      } catch (Error e) {
        stoppedBy = e;
        LOG.log(Level.SEVERE, "indexer lane " + number + " stopped; flush and apply now throw", e);
      }
    }

    private void drain() {
      final Object[] batch = new Object[BATCH];
      final RouterEvent[] events = new RouterEvent[BATCH];
      while (true) {
        final int got = queue.drain(batch, BATCH);
        if (got == 0) {
          if (Thread.interrupted()) return;
          queue.awaitItem();
          continue;
        }
        int n = 0;
        for (int i = 0; i < got; i++) {
          final Object item = batch[i];
          batch[i] = null; // taken: keep no references until the next batch
          if (item instanceof RouterEvent e) {
            events[n++] = e;
            continue;
          }
          applyEvents(events, n);
          n = 0;
          if (item == STOP) return;
          try {
            ((Runnable) item).run();
          } catch (RuntimeException ex) {
            failed(item, ex);
          }
        }
        applyEvents(events, n);
      }
    }

    /** Applies {@code events[0, n)} in order, under one hold of the lock when the index allows. */
    private void applyEvents(RouterEvent[] events, int n) {
      if (n == 0) return;
      if (stepped != null) {
        stepped.applyAll(events, 0, n, onFailure);
      } else {
        for (int i = 0; i < n; i++) {
          try {
            index.apply(events[i]);
          } catch (RuntimeException ex) {
            failed(events[i], ex);
          }
        }
      }
      Arrays.fill(events, 0, n, null); // applied: keep no references until the next batch
    }
  }
}
