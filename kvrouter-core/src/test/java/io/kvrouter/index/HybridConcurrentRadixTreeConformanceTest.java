package io.kvrouter.index;

class HybridConcurrentRadixTreeConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.concurrentRadixTree();
  }
}
