package io.kvrouter.index;

class HybridPositional1ConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.positional(1);
  }
}
