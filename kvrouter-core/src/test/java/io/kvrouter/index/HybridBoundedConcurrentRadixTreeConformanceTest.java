package io.kvrouter.index;

class HybridBoundedConcurrentRadixTreeConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.concurrentRadixTree(IndexKinds.NEVER_REACHED);
  }
}
