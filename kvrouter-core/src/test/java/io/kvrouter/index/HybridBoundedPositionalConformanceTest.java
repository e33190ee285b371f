package io.kvrouter.index;

class HybridBoundedPositionalConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.positional(32, IndexKinds.NEVER_REACHED);
  }
}
