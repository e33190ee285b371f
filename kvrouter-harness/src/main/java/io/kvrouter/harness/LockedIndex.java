package io.kvrouter.harness;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import io.kvrouter.index.IndexStats;
import io.kvrouter.index.KvIndex;
import io.kvrouter.index.OverlapScores;
import java.util.List;
import java.util.concurrent.locks.ReentrantLock;

/**
 * A single-threaded index ({@code KvIndexes.radixTree()}) made safe for many threads by one lock
 * around every call: reads and writes take turns, as they do behind the single actor of Dynamo's
 * single-threaded radix tree.
 *
 * <p>It implements {@code KvIndex} itself instead of extending {@code ForwardingKvIndex} on
 * purpose: a method added to {@code KvIndex} must not reach the inner index without the lock, so
 * the compiler makes every new method be written here.
 */
final class LockedIndex implements KvIndex {
  private final KvIndex inner;
  private final ReentrantLock lock = new ReentrantLock();

  public LockedIndex(KvIndex inner) {
    this.inner = inner;
  }

  @Override
  public void apply(RouterEvent event) {
    lock.lock();
    try {
      inner.apply(event);
    } finally {
      lock.unlock();
    }
  }

  @Override
  public OverlapScores findMatches(long[] localHashes, boolean earlyExit) {
    lock.lock();
    try {
      return inner.findMatches(localHashes, earlyExit);
    } finally {
      lock.unlock();
    }
  }

  @Override
  public void clearWorker(long workerId) {
    lock.lock();
    try {
      inner.clearWorker(workerId);
    } finally {
      lock.unlock();
    }
  }

  @Override
  public void removeWorker(long workerId) {
    lock.lock();
    try {
      inner.removeWorker(workerId);
    } finally {
      lock.unlock();
    }
  }

  @Override
  public long[] workerIds() {
    lock.lock();
    try {
      return inner.workerIds();
    } finally {
      lock.unlock();
    }
  }

  @Override
  public int blockCount(Worker worker) {
    lock.lock();
    try {
      return inner.blockCount(worker);
    } finally {
      lock.unlock();
    }
  }

  @Override
  public List<RouterEvent> dump() {
    lock.lock();
    try {
      return inner.dump();
    } finally {
      lock.unlock();
    }
  }

  @Override
  public void flush() {
    lock.lock();
    try {
      inner.flush();
    } finally {
      lock.unlock();
    }
  }

  @Override
  public IndexStats stats() {
    lock.lock();
    try {
      return inner.stats();
    } finally {
      lock.unlock();
    }
  }

  @Override
  public void close() {
    inner.close();
  }
}
