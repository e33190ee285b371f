package io.kvrouter.index;

class HybridBoundedCompressedTreeConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.compressedTree(IndexKinds.NEVER_REACHED);
  }
}
