package io.kvrouter.index;

class ThreadPoolOverPositionalConformanceTest extends KvIndexConformanceTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.threadPool(KvIndexes.positional(32), 2);
  }
}
