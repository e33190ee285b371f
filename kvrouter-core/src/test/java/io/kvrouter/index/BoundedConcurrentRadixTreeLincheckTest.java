package io.kvrouter.index;

/**
 * The Lincheck scenarios of {@link ConcurrentRadixTreeLincheckTest} on {@code
 * concurrentRadixTree(2)}: the scenarios' three-block path does not fit, so stores evict while
 * readers mark used bits, and every history must still be linearizable.
 */
public class BoundedConcurrentRadixTreeLincheckTest extends ConcurrentRadixTreeLincheckTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.concurrentRadixTree(2);
  }
}
