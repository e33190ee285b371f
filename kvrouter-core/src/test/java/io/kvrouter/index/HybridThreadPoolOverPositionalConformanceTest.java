package io.kvrouter.index;

class HybridThreadPoolOverPositionalConformanceTest extends HybridConformanceTest {
  @Override
  protected KvIndex newMainIndex() {
    return KvIndexes.threadPool(KvIndexes.positional(32), 2);
  }
}
