package io.kvrouter.index;

class ConcurrentRadixTreeConformanceTest extends KvIndexConformanceTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.concurrentRadixTree();
  }
}
