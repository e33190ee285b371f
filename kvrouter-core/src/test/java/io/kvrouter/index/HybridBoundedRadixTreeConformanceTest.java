package io.kvrouter.index;

class HybridBoundedRadixTreeConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.radixTree(IndexKinds.NEVER_REACHED);
  }
}
