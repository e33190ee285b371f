package io.kvrouter.index;

class RadixTreeConformanceTest extends KvIndexConformanceTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.radixTree();
  }
}
