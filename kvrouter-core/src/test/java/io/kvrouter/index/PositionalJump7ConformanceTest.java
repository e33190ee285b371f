package io.kvrouter.index;

/** The positional conformance suite with jump size 7. */
class PositionalJump7ConformanceTest extends PositionalConformanceTest {
  @Override
  protected int jumpSize() {
    return 7;
  }
}
