package io.kvrouter.index;

class HybridThreadPoolOverBoundedCompressedTreeConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.threadPool(KvIndexes.concurrentCompressedTree(IndexKinds.NEVER_REACHED), 2);
  }
}
