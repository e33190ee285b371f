package io.kvrouter.index;

/** The positional conformance suite with jump size 1. */
class PositionalJump1ConformanceTest extends PositionalConformanceTest {
  @Override
  protected int jumpSize() {
    return 1;
  }
}
