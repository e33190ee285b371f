package io.kvrouter.index;

class ConcurrentCompressedTreeConformanceTest extends KvIndexConformanceTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.concurrentCompressedTree();
  }
}
