package io.kvrouter.index;

class HybridThreadPoolOverConcurrentTreeConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.threadPool(KvIndexes.concurrentRadixTree(), 2);
  }
}
