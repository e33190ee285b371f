package io.kvrouter.index;

class HybridCompressedTreeConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.compressedTree();
  }
}
