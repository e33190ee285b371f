package io.kvrouter.index;

class HybridThreadPoolOverBoundedTreeConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.threadPool(KvIndexes.concurrentRadixTree(IndexKinds.NEVER_REACHED), 2);
  }
}
