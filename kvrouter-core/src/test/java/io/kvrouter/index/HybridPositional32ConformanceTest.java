package io.kvrouter.index;

class HybridPositional32ConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.positional(32);
  }
}
