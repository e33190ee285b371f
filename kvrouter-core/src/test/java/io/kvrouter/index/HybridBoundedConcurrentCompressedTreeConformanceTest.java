package io.kvrouter.index;

class HybridBoundedConcurrentCompressedTreeConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.concurrentCompressedTree(IndexKinds.NEVER_REACHED);
  }
}
