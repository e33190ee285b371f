package io.kvrouter.index;

/** The shared suite on a bounded kind whose bound is never reached: same answers, no eviction. */
class BoundedConcurrentRadixTreeConformanceTest extends KvIndexConformanceTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.concurrentRadixTree(IndexKinds.NEVER_REACHED);
  }
}
