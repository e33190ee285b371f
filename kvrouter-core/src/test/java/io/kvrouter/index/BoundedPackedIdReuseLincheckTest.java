package io.kvrouter.index;

/**
 * {@link BoundedPositionalLincheckTest}'s scenarios ({@code positional(2, 2)}: stores evict while
 * readers mark used bits) with freed ids reused at once (reuse batch 1), so the ids that evictions
 * and prunes free go back into use inside the scenarios while readers walk and the clock queue may
 * still name them (PackedClockBound: parked ids).
 */
public class BoundedPackedIdReuseLincheckTest extends ConcurrentRadixTreeLincheckTest {
  @Override
  protected KvIndex newIndex() {
    return new PackedPositionalIndex(2, null, 1, 2);
  }
}
