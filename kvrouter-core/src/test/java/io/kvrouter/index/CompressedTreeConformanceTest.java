package io.kvrouter.index;

class CompressedTreeConformanceTest extends KvIndexConformanceTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.compressedTree();
  }
}
