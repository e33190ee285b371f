package io.kvrouter.index;

class ThreadPoolOverCompressedTreeConformanceTest extends KvIndexConformanceTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.threadPool(KvIndexes.concurrentCompressedTree(), 2);
  }
}
