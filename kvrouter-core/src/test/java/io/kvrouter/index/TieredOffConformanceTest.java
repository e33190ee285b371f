package io.kvrouter.index;

/**
 * The conformance suite on a {@link TieredIndex} used as a {@link KvIndex} before any non-device
 * event: every write goes straight to the device index, and its answers are the device index's.
 */
class TieredOffConformanceTest extends KvIndexConformanceTest {
  @Override
  protected KvIndex newIndex() {
    return TieredIndex.of(KvIndexes::concurrentCompressedTree);
  }
}
