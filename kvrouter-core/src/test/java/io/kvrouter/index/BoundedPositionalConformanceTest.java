package io.kvrouter.index;

/** The shared suite on a bounded kind whose bound is never reached: same answers, no eviction. */
class BoundedPositionalConformanceTest extends KvIndexConformanceTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.positional(32, IndexKinds.NEVER_REACHED);
  }
}
