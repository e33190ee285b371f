package io.kvrouter.index;

/**
 * The conformance suite on a {@link TieredIndex} used as a {@link KvIndex} with its cumulative
 * indexes made ({@link TieredIndex#withTiers}): every write also goes through the tier masks and
 * the three cumulative indexes, and the device answers stay the device index's.
 */
class TieredOnConformanceTest extends KvIndexConformanceTest {
  @Override
  protected KvIndex newIndex() {
    return TieredIndex.withTiers(KvIndexes::concurrentRadixTree, Tier.EXTERNAL);
  }
}
