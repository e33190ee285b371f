package io.kvrouter.index;

import io.kvrouter.event.RouterEvent;
import io.kvrouter.event.Worker;
import java.util.List;
import java.util.Objects;

/**
 * A {@link KvIndex} that hands every call to another one; a decorator extends it and overrides only
 * what it changes (for example {@code apply}, or {@code close} when it does not own the index). It
 * adds no state, no lock and no thread: the wrapped index's threading rules hold as they are
 * (docs/concurrency.md).
 */
public abstract class ForwardingKvIndex implements KvIndex {
  private final KvIndex delegate;

  /** Forwards to {@code delegate}. */
  protected ForwardingKvIndex(KvIndex delegate) {
    this.delegate = Objects.requireNonNull(delegate, "delegate");
  }

  /** The wrapped index. */
  protected final KvIndex delegate() {
    return delegate;
  }

  @Override
  public void apply(RouterEvent event) {
    delegate.apply(event);
  }

  @Override
  public OverlapScores findMatches(long[] localHashes, boolean earlyExit) {
    return delegate.findMatches(localHashes, earlyExit);
  }

  @Override
  public void clearWorker(long workerId) {
    delegate.clearWorker(workerId);
  }

  @Override
  public void removeWorker(long workerId) {
    delegate.removeWorker(workerId);
  }

  @Override
  public List<RouterEvent> dump() {
    return delegate.dump();
  }

  @Override
  public long[] workerIds() {
    return delegate.workerIds();
  }

  @Override
  public int blockCount(Worker worker) {
    return delegate.blockCount(worker);
  }

  @Override
  public void flush() {
    delegate.flush();
  }

  @Override
  public IndexStats stats() {
    return delegate.stats();
  }

  @Override
  public void close() {
    delegate.close();
  }

  @Override
  public String toString() {
    return getClass().getSimpleName() + "(" + delegate + ")";
  }
}
