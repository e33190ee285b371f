package io.kvrouter.index;

/** The Lincheck scenarios of {@link ConcurrentRadixTreeLincheckTest} on {@code positional(2)}. */
public class PositionalLincheckTest extends ConcurrentRadixTreeLincheckTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.positional(2);
  }
}
