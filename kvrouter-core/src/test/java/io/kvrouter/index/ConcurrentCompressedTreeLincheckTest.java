package io.kvrouter.index;

/** The Lincheck scenarios of {@link ConcurrentRadixTreeLincheckTest} on the compressed tree. */
public class ConcurrentCompressedTreeLincheckTest extends ConcurrentRadixTreeLincheckTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.concurrentCompressedTree();
  }
}
