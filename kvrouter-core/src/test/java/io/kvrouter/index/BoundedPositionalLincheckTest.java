package io.kvrouter.index;

/**
 * The Lincheck scenarios of {@link ConcurrentRadixTreeLincheckTest} on {@code positional(2, 2)}:
 * the scenarios' three-block path does not fit, so stores evict while readers mark used bits.
 */
public class BoundedPositionalLincheckTest extends ConcurrentRadixTreeLincheckTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.positional(2, 2);
  }
}
