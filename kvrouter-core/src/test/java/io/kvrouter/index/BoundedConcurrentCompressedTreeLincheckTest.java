package io.kvrouter.index;

/**
 * The Lincheck scenarios of {@link ConcurrentRadixTreeLincheckTest} on {@code
 * concurrentCompressedTree(2)}: the scenarios' three-block path does not fit, so stores evict
 * (dropping the tails of runs, then pruning and merging them) while readers mark used bits, and
 * every history must still be linearizable.
 */
public class BoundedConcurrentCompressedTreeLincheckTest extends ConcurrentRadixTreeLincheckTest {
  @Override
  protected KvIndex newIndex() {
    return KvIndexes.concurrentCompressedTree(2);
  }
}
