package io.kvrouter.index;

import java.lang.invoke.MethodHandles;
import java.lang.invoke.VarHandle;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import java.util.concurrent.locks.LockSupport;
import java.util.concurrent.locks.ReentrantLock;
import java.util.function.BooleanSupplier;
import org.jspecify.annotations.Nullable;

/**
 * One {@link ThreadPoolIndexer} lane's queue: a bounded ring that any thread puts items into and
 * one consumer thread drains many at a time, with no lock and no allocation on either side while
 * the ring is neither empty nor full.
 *
 * <pre>
 * Implementation notes
 *
 * slots: Object[capacity], capacity a power of two. tail counts the slots claimed by producers,
 * head the items the consumer has taken; both only grow. Item n lives in slots[n &amp; mask] from
 * its producer's write until the consumer takes it and writes null back. A producer claims
 * index t with a CAS on tail, and only when t - head &lt; capacity, so the slot it writes is one
 * the consumer has emptied (the consumer's null writes come before its release of head, the
 * producer's slot write after its read of head). Claiming and writing are two steps: the
 * consumer reads slots in order from head and stops at the first null, a slot claimed but not
 * yet written, whose producer wakes the consumer once it has written it.
 *
 * Who writes: producers write tail (CAS) and their own slot (volatile); the consumer writes head
 * (volatile), the taken slots (null) and sleeping. Who reads: everybody reads tail and head; only
 * the consumer reads slots.
 *
 * Wake-ups. The consumer, finding the ring empty, spins SPINS times, then sets sleeping (volatile)
 * and parks only if the slot at head is still null (volatile read). A producer, after its
 * volatile slot write, unparks the consumer when sleeping is set (and clears it). Both sides
 * write, then read the other's variable, all volatile: at least one sees the other, so no
 * wake-up is lost; a needless unpark only costs a spurious return from the next park. A
 * producer pays one volatile read and no system call while the consumer is busy: a lane that is
 * kept busy drains everything queued since its last batch per wake-up.
 *
 * Back-pressure. A producer that finds the ring full counts itself in fullWaiters and waits on
 * notFull (under fullLock, the one lock here, taken only when the ring is full); the consumer,
 * after publishing head, signals them once fullWaiters is not 0 and RESUME_MAX slots (a quarter
 * of a small ring) are free, so a full ring wakes its producers about once per lane batch, not
 * once per item; a ring the consumer emptied is all free. The same write-then-read argument: waiters++ then a re-read of
 * head, against head's write then a read of fullWaiters. A waiting producer wakes every
 * WAIT_MILLIS to ask whether the consumer is still alive (the caller's stopped test) and gives up
 * when it is not.
 * </pre>
 */
final class LaneQueue {
  private static final VarHandle SLOTS = MethodHandles.arrayElementVarHandle(Object[].class);
  private static final VarHandle TAIL;
  private static final VarHandle HEAD;
  private static final VarHandle SLEEPING;

  static {
    try {
      MethodHandles.Lookup l = MethodHandles.lookup();
      TAIL = l.findVarHandle(LaneQueue.class, "tail", long.class);
      HEAD = l.findVarHandle(LaneQueue.class, "head", long.class);
      SLEEPING = l.findVarHandle(LaneQueue.class, "sleeping", int.class);
    } catch (ReflectiveOperationException e) {
      throw new ExceptionInInitializerError(e);
    }
  }

  /** Empty-ring checks the consumer spins through before it parks. */
  private static final int SPINS = 64;

  /**
   * Free slots at which producers waiting for room are woken, at most: a producer blocked on one
   * full lane feeds no other lane meanwhile, so it is woken soon (a quarter of a small ring).
   */
  private static final int RESUME_MAX = 1024;

  /** How often a producer waiting for room asks whether the consumer stopped. */
  private static final long WAIT_MILLIS = 20;

  private final @Nullable Object[] slots;
  private final int mask;
  private final int resume; // free slots at which waiting producers are woken

  @SuppressWarnings("unused") // through TAIL
  private volatile long tail;

  @SuppressWarnings("unused") // through HEAD
  private volatile long head;

  @SuppressWarnings("unused") // through SLEEPING
  private volatile int sleeping;

  private volatile @Nullable Thread consumer;
  private volatile int fullWaiters; // written under fullLock
  private final ReentrantLock fullLock = new ReentrantLock();
  private final Condition notFull = fullLock.newCondition();

  /**
   * @throws IllegalArgumentException when {@code capacity} is not a power of two of at least 4
   */
  LaneQueue(int capacity) {
    if (capacity < 4 || Integer.bitCount(capacity) != 1) {
      throw new IllegalArgumentException("capacity must be a power of two >= 4, got " + capacity);
    }
    slots = new Object[capacity];
    mask = capacity - 1;
    resume = Math.min(capacity / 4, RESUME_MAX);
  }

  /** The thread that drains this queue (the one {@link #awaitItem()} parks and producers wake). */
  void consumer(Thread thread) {
    consumer = thread;
  }

  /**
   * Queues {@code item}, waiting while the ring is full; returns false, without queueing it, when
   * {@code stopped} says (checked every WAIT_MILLIS of waiting) that the consumer will never take
   * it.
   *
   * @throws InterruptedException when interrupted while waiting for room (nothing queued)
   */
  boolean put(Object item, BooleanSupplier stopped) throws InterruptedException {
    long t;
    while (true) {
      t = (long) TAIL.getVolatile(this);
      if (t - (long) HEAD.getVolatile(this) >= slots.length) {
        if (!awaitRoom(stopped)) return false;
        continue;
      }
      if (TAIL.compareAndSet(this, t, t + 1)) break;
    }
    SLOTS.setVolatile(slots, (int) t & mask, item);
    if ((int) SLEEPING.getVolatile(this) != 0 && SLEEPING.compareAndSet(this, 1, 0)) {
      LockSupport.unpark(consumer);
    }
    return true;
  }

  private boolean awaitRoom(BooleanSupplier stopped) throws InterruptedException {
    fullLock.lock();
    try {
      fullWaiters++;
      try {
        while ((long) TAIL.getVolatile(this) - (long) HEAD.getVolatile(this) >= slots.length) {
          if (!notFull.await(WAIT_MILLIS, TimeUnit.MILLISECONDS) && stopped.getAsBoolean()) {
            return false;
          }
        }
        return true;
      } finally {
        fullWaiters--;
      }
    } finally {
      fullLock.unlock();
    }
  }

  /**
   * Consumer only: moves up to {@code max} items, oldest first, into {@code into[0, n)} and returns
   * n (0 when the next item is not there yet).
   */
  int drain(@Nullable Object[] into, int max) {
    long h = (long) HEAD.get(this); // only this thread writes head
    int n = 0;
    while (n < max) {
      final int i = (int) h & mask;
      final Object item = SLOTS.getAcquire(slots, i);
      if (item == null) break;
      SLOTS.set(slots, i, null); // published by head's volatile write below
      into[n++] = item;
      h++;
    }
    if (n > 0) {
      HEAD.setVolatile(this, h);
      if (fullWaiters != 0 && slots.length - ((long) TAIL.getVolatile(this) - h) >= resume) {
        fullLock.lock();
        try {
          notFull.signalAll();
        } finally {
          fullLock.unlock();
        }
      }
    }
    return n;
  }

  /**
   * Consumer only: returns once the next item is there, or on a spurious wake-up or an interrupt
   * (the caller drains and, finding nothing, calls again or checks its interrupt).
   */
  void awaitItem() {
    final int i = (int) (long) HEAD.get(this) & mask;
    for (int s = 0; s < SPINS; s++) {
      if (SLOTS.getAcquire(slots, i) != null) return;
      Thread.onSpinWait();
    }
    SLEEPING.setVolatile(this, 1);
    if (SLOTS.getVolatile(slots, i) == null) LockSupport.park(this);
    SLEEPING.setVolatile(this, 0);
  }

  /** Items queued and not yet taken (a snapshot: producers and the consumer move on). */
  long size() {
    return Math.max(0, (long) TAIL.getVolatile(this) - (long) HEAD.getVolatile(this));
  }
}
