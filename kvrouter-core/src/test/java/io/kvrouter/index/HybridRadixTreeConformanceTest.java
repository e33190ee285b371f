package io.kvrouter.index;

class HybridRadixTreeConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.radixTree();
  }
}
