package io.kvrouter.index;

class ThreadPoolOverConcurrentTreeConformanceTest extends KvIndexConformanceTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.threadPool(KvIndexes.concurrentRadixTree(), 2);
  }
}
