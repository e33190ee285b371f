package io.kvrouter.index;

class HybridThreadPoolOverCompressedTreeConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.threadPool(KvIndexes.concurrentCompressedTree(), 2);
  }
}
