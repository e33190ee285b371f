package io.kvrouter.index;

class HybridTieredOnConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return TieredIndex.withTiers(KvIndexes::concurrentRadixTree, Tier.EXTERNAL);
  }
}
