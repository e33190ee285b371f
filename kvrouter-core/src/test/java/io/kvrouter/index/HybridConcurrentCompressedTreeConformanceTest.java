package io.kvrouter.index;

class HybridConcurrentCompressedTreeConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.concurrentCompressedTree();
  }
}
